import Foundation

/// When and how long to wait before a failed attempt is tried again (SPEC "Retries and the
/// network"), after Alamofire's `RetryPolicy`: up to ``retryLimit`` retries with exponential
/// backoff, ±25 % jitter, and `Retry-After` honoured as a minimum.
///
/// The policy is pure: the caller supplies the jitter (a random number in `-1...1`) and the
/// current time, so tests are deterministic.
public struct RetryPolicy: Sendable {
    /// The default number of retries (`--retries`): at most 9 attempts.
    public static let defaultRetryLimit = 8
    /// The wait before the first retry, in seconds; each further retry doubles it.
    public static let baseDelay: Double = 0.5
    /// The longest backoff before jitter, in seconds.
    public static let maxDelay: Double = 300
    /// The largest jitter, as a fraction of the backoff (±25 %).
    public static let jitterFraction = 0.25
    /// HTTP statuses worth trying again: request timeout, too many requests, and the server
    /// errors that usually pass (500, 502, 503, 504).
    public static let retryableStatuses: Set<Int> = [408, 429, 500, 502, 503, 504]

    /// The number of retries after the first attempt (so at most `retryLimit + 1` attempts).
    /// A negative value counts as 0.
    public var retryLimit: Int

    /// Creates a policy.
    ///
    /// - Parameter retryLimit: The number of retries; ``defaultRetryLimit`` by default.
    public init(retryLimit: Int = defaultRetryLimit) {
        self.retryLimit = retryLimit
    }

    /// The backoff before the `k`-th retry: `min(0.5 × 2^(k−1), 300) × (1 + 0.25 × jitter)`.
    ///
    /// - Parameters:
    ///   - k: The retry about to be made, from 1 (values below 1 count as 1).
    ///   - jitter: A random number in `-1...1` (clamped; NaN counts as 0).
    /// - Returns: Seconds to wait, between 0.375 and 375.
    public func backoff(forRetry k: Int, jitter: Double) -> Double {
        let exponent = Double(max(k, 1) - 1)
        let base = min(Self.baseDelay * pow(2, exponent), Self.maxDelay)
        let j = jitter.isNaN ? 0 : min(max(jitter, -1), 1)
        return base * (1 + Self.jitterFraction * j)
    }

    /// The wait before the `k`-th retry: the backoff, or the server's `Retry-After` if that is
    /// longer.
    ///
    /// - Parameters:
    ///   - k: The retry about to be made, from 1.
    ///   - retryAfter: Seconds from the response's `Retry-After` (see ``parseRetryAfter(_:now:)``),
    ///     or `nil`. It is not capped: the server asked for it.
    ///   - jitter: A random number in `-1...1`.
    /// - Returns: Seconds to wait.
    public func delay(forRetry k: Int, retryAfter: Double?, jitter: Double) -> Double {
        let backoff = backoff(forRetry: k, jitter: jitter)
        guard let retryAfter, retryAfter.isFinite else { return backoff }
        return max(backoff, min(retryAfter, Self.maxRetryAfter))
    }

    /// Whether a failed attempt is tried again.
    ///
    /// - Parameters:
    ///   - error: The attempt's error; only errors marked `retryable` are retried.
    ///   - retriesUsed: Retries already made for this job (0 after the first attempt). Attempts
    ///     that waited for the network to return (`waitReason` `"offline"`) do not count.
    /// - Returns: `true` if the error is retryable and a retry is left.
    public func shouldRetry(error: TransferError, retriesUsed: Int) -> Bool {
        error.retryable && retriesUsed < max(retryLimit, 0)
    }

    /// The error for a response whose status is not 2xx (SPEC "Downloads": "only 2xx succeeds").
    ///
    /// - Parameter status: The HTTP status code.
    /// - Returns: An `http_status` error, retryable iff `status` is in ``retryableStatuses``, with
    ///   a message like `HTTP 404 Not Found` (or `HTTP 599` for a status without a known reason).
    public static func error(forHTTPStatus status: Int) -> TransferError {
        let message = HTTPStatusReason.phrase(for: status).map { "HTTP \(status) \($0)" } ?? "HTTP \(status)"
        return TransferError(.httpStatus, message, retryable: retryableStatuses.contains(status))
    }

    // MARK: - Retry-After

    /// Parses a `Retry-After` value (RFC 9110 §10.2.3) into seconds from `now`.
    ///
    /// - Parameters:
    ///   - value: `delay-seconds` (ASCII digits) or an HTTP-date in any of the three formats
    ///     HTTP/1.1 recipients must accept: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`),
    ///     RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime (`Sun Nov  6 08:49:37 1994`).
    ///     The weekday is not checked; surrounding whitespace is ignored.
    ///   - now: The current time.
    /// - Returns: Seconds to wait (0 for a date in the past), or `nil` for anything else.
    public static func parseRetryAfter(_ value: String, now: Date) -> Double? {
        let text = value.trimmingCharacters(in: .whitespaces)
        guard !text.isEmpty else { return nil }
        if text.utf8.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }) {
            return Double(text)
        }
        guard let date = HTTPDate.parse(text, now: now) else { return nil }
        return max(0, date.timeIntervalSince(now))
    }

    /// The wait a response asks for: its `Retry-After` (`value`) when its `status` is 429 or 503
    /// (SPEC: honoured there as a minimum), else nil.
    public static func retryAfter(status: Int?, value: String?, now: Date = Date()) -> Double? {
        guard status == 429 || status == 503, let value else { return nil }
        return parseRetryAfter(value, now: now)
    }

    /// The longest `Retry-After` honoured (one day): a hostile or broken server cannot park a job
    /// for years, nor overflow the daemon's timers.
    public static let maxRetryAfter: Double = 86_400
}

// MARK: - Helpers

extension RetryPolicy {
    /// HTTP-date parsing for `Retry-After`, without `DateFormatter` (whose leniency differs between
    /// platforms and which is not `Sendable`).
    fileprivate enum HTTPDate {
        private static let months = [
            "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
        ]

        /// Parses an IMF-fixdate, RFC 850 or asctime date; `now` resolves RFC 850's two-digit year.
        static func parse(_ text: String, now: Date) -> Date? {
            let tokens = text.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            if tokens.count == 6, tokens[0].hasSuffix(","), tokens[5] == "GMT" {
                // IMF-fixdate: Sun, 06 Nov 1994 08:49:37 GMT
                guard tokens[1].count == 2, tokens[3].count == 4, let day = Int(tokens[1]),
                    let month = month(tokens[2]), let year = Int(tokens[3])
                else { return nil }
                return make(year: year, month: month, day: day, time: tokens[4])
            }
            if tokens.count == 4, tokens[0].hasSuffix(","), tokens[3] == "GMT" {
                // RFC 850: Sunday, 06-Nov-94 08:49:37 GMT
                let dmy = tokens[1].split(separator: "-", omittingEmptySubsequences: false)
                guard dmy.count == 3, dmy[0].count == 2, dmy[2].count == 2, let day = Int(dmy[0]),
                    let month = month(String(dmy[1])), let yy = Int(dmy[2])
                else { return nil }
                return make(year: fullYear(twoDigit: yy, now: now), month: month, day: day, time: tokens[2])
            }
            if tokens.count == 5, !tokens[0].hasSuffix(",") {
                // asctime: Sun Nov  6 08:49:37 1994
                guard (1...2).contains(tokens[2].count), tokens[4].count == 4, let month = month(tokens[1]),
                    let day = Int(tokens[2]), let year = Int(tokens[4])
                else { return nil }
                return make(year: year, month: month, day: day, time: tokens[3])
            }
            return nil
        }

        /// RFC 9110 §5.6.7: a two-digit year more than 50 years in the future is in the past century.
        private static func fullYear(twoDigit yy: Int, now: Date) -> Int {
            let currentYear = 1970 + Int((now.timeIntervalSince1970 / 86_400) / 365.2425)
            let century = currentYear / 100 * 100
            var year = century + yy
            if year > currentYear + 50 { year -= 100 }
            return year
        }

        private static func month(_ name: String) -> Int? {
            months.firstIndex(of: name.lowercased()).map { $0 + 1 }
        }

        private static func make(year: Int, month: Int, day: Int, time: String) -> Date? {
            let hms = time.split(separator: ":", omittingEmptySubsequences: false)
            guard hms.count == 3, hms.allSatisfy({ $0.count == 2 && $0.allSatisfy(\.isASCII) }),
                let h = Int(hms[0]), let m = Int(hms[1]), let s = Int(hms[2]),
                (0...23).contains(h), (0...59).contains(m), (0...60).contains(s),
                (1...12).contains(month), (1...daysIn(month: month, year: year)).contains(day),
                year >= 1
            else { return nil }
            let days = daysFromCivil(year: year, month: month, day: day)
            return Date(timeIntervalSince1970: Double(days * 86_400 + h * 3600 + m * 60 + s))
        }

        private static func daysIn(month: Int, year: Int) -> Int {
            switch month {
            case 2:
                let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0
                return leap ? 29 : 28
            case 4, 6, 9, 11:
                return 30
            default:
                return 31
            }
        }

        /// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's `days_from_civil`).
        private static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
            let y = month <= 2 ? year - 1 : year
            let era = (y >= 0 ? y : y - 399) / 400
            let yoe = y - era * 400
            let mp = (month + 9) % 12
            let doy = (153 * mp + 2) / 5 + day - 1
            let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
            return era * 146_097 + doe - 719_468
        }
    }

    /// Reason phrases of the common HTTP statuses (RFC 9110 §15), for error messages.
    fileprivate enum HTTPStatusReason {
        private static let phrases: [Int: String] = [
            300: "Multiple Choices", 301: "Moved Permanently", 302: "Found", 303: "See Other",
            304: "Not Modified", 305: "Use Proxy", 307: "Temporary Redirect", 308: "Permanent Redirect",
            400: "Bad Request", 401: "Unauthorized", 402: "Payment Required", 403: "Forbidden",
            404: "Not Found", 405: "Method Not Allowed", 406: "Not Acceptable",
            407: "Proxy Authentication Required", 408: "Request Timeout", 409: "Conflict", 410: "Gone",
            411: "Length Required", 412: "Precondition Failed", 413: "Content Too Large", 414: "URI Too Long",
            415: "Unsupported Media Type", 416: "Range Not Satisfiable", 417: "Expectation Failed",
            421: "Misdirected Request", 422: "Unprocessable Content", 423: "Locked", 425: "Too Early",
            426: "Upgrade Required", 428: "Precondition Required", 429: "Too Many Requests",
            431: "Request Header Fields Too Large", 451: "Unavailable For Legal Reasons",
            500: "Internal Server Error", 501: "Not Implemented", 502: "Bad Gateway", 503: "Service Unavailable",
            504: "Gateway Timeout", 505: "HTTP Version Not Supported", 507: "Insufficient Storage",
            508: "Loop Detected", 511: "Network Authentication Required",
        ]

        /// The reason phrase of `status`, or `nil` when it has no well-known one.
        static func phrase(for status: Int) -> String? {
            phrases[status]
        }
    }
}
