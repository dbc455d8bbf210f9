import Foundation

/// Which redirects a transfer follows (SPEC "Security"): http and https only, never https→http,
/// at most ``maxRedirects``; uploads follow only 307 and 308.
public enum RedirectPolicy {
    /// The most redirects one attempt follows.
    public static let maxRedirects = 10

    /// The next URL for a redirect response, or the `redirect` error that refuses it.
    /// - Parameters:
    ///   - from: the URL that answered.
    ///   - location: the absolute target (libcurl's `CURLINFO_REDIRECT_URL`).
    ///   - status: the 3xx status.
    ///   - followed: redirects already followed in this attempt.
    ///   - isUpload: uploads follow only 307/308.
    public static func next(
        from: String, location: String?, status: Int, followed: Int, isUpload: Bool
    ) -> Result<String, TransferError> {
        guard let location, !location.isEmpty else {
            return .failure(TransferError(.httpStatus, "HTTP \(status) without a Location", retryable: false))
        }
        if isUpload && status != 307 && status != 308 {
            return .failure(
                TransferError(.redirect, "an upload is not sent again after a \(status) redirect", retryable: false))
        }
        if followed >= maxRedirects {
            return .failure(TransferError(.redirect, "more than \(maxRedirects) redirects", retryable: false))
        }
        guard let target = URLComponents(string: location), let scheme = target.scheme?.lowercased() else {
            return .failure(TransferError(.redirect, "redirect to an invalid URL", retryable: false))
        }
        // The scheme first: `file:///etc/passwd` has no host, and is refused as a file: URL.
        guard scheme == "http" || scheme == "https" else {
            return .failure(TransferError(.redirect, "redirect to a \(scheme): URL refused", retryable: false))
        }
        guard let host = target.host, !host.isEmpty else {
            return .failure(TransferError(.redirect, "redirect to an invalid URL", retryable: false))
        }
        if downgrades(from: from, to: location) {
            return .failure(TransferError(.redirect, "redirect from https to http refused", retryable: false))
        }
        return .success(location)
    }

    /// Whether going from `from` to `target` (absolute URLs) would leave https for http, which
    /// SPEC never allows: not for a redirect, nor for a resumable upload's URL.
    public static func downgrades(from: String, to target: String) -> Bool {
        URLComponents(string: from)?.scheme?.lowercased() == "https"
            && URLComponents(string: target)?.scheme?.lowercased() == "http"
    }

    /// Whether two URLs name the same host (a user's `Host` header goes only there, as curl's does;
    /// another port keeps it).
    public static func sameHost(_ a: String, _ b: String) -> Bool {
        guard let x = URLComponents(string: a)?.host?.lowercased(), let y = URLComponents(string: b)?.host?.lowercased()
        else { return false }
        return x == y
    }

    /// Whether two URLs name the same host and port (credentials go only to the original one).
    public static func sameOrigin(_ a: String, _ b: String) -> Bool {
        guard let x = URLComponents(string: a), let y = URLComponents(string: b) else { return false }
        func port(_ c: URLComponents) -> Int { c.port ?? (c.scheme?.lowercased() == "https" ? 443 : 80) }
        return x.host?.lowercased() == y.host?.lowercased() && port(x) == port(y)
            && x.scheme?.lowercased() == y.scheme?.lowercased()
    }
}
