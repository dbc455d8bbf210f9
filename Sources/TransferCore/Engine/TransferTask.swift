import CCurl
import Foundation

/// How one attempt of a transfer ended.
public enum AttemptOutcome {
    /// The transfer finished and was verified; the digest of the file or payload.
    case completed(sha256: String)
    /// The attempt failed; `retryAfter` is the server's `Retry-After`, in seconds.
    case failed(TransferError, retryAfter: Double?)
}

/// Why the engine stopped a running attempt.
public enum StopReason {
    case pause
    case cancel
    case shutdown
    /// The network came back and this transfer looked dead: start again at once.
    case restart
}

/// One running attempt of a job: an easy handle in the engine's multi, the response's headers,
/// live progress. Subclasses handle the body (``DownloadTask``, ``UploadTask``).
/// Kept alive by the engine while its handle is in the multi; callbacks get it unretained.
/// Loop-thread only.
open class TransferTask {
    /// The job's id.
    public let jobId: Int64
    /// The job's row when the attempt started (options, validators, offsets).
    public private(set) var record: JobRecord
    unowned let engine: Engine
    /// The current easy handle (a new one per redirect hop).
    var easy: CurlEasy?
    /// The URL of the current hop.
    var currentURL: String
    var redirectsFollowed = 0
    /// Whether credentials still apply (dropped after a redirect to another origin).
    var sendCredentials = true

    // Response of the current hop.
    var status: Int?
    var headers: [(String, String)] = []
    var headersComplete = false

    // Live progress.
    /// Bytes on disk (download) or sent (upload), counting resumed bytes.
    public var bytes: Int64 = 0
    public var total: Int64?
    /// Loop time (ms) when bytes last grew.
    public var lastProgressAt: UInt64
    var rate = RateMeter()
    /// An error found in a callback that ends the attempt (returned by ``finish(code:)``).
    var abortError: TransferError?
    /// Set when the engine stopped this attempt.
    public var stopReason: StopReason?
    /// Whether the easy handle is in the multi now.
    var isInMulti = false
    /// Whether the attempt is still getting ready (e.g. hashing a resumed part off the loop).
    var isPreparing = false

    init(engine: Engine, record: JobRecord) {
        self.engine = engine
        self.record = record
        self.jobId = record.id ?? 0
        self.currentURL = record.url
        self.lastProgressAt = engine.loop.nowMillis
    }

    /// Updates the cached row after the engine changed it.
    func refresh(_ r: JobRecord) { record = r }

    // MARK: - Subclass hooks

    /// Prepares files and state before the first request. Throws a job error.
    func prepare() throws {}
    /// Adds body handling to a freshly configured handle.
    func configureBody(_ easy: CurlEasy) {}
    /// Extra request headers for this hop; they replace user headers of the same name.
    func extraHeaders() -> [String] { [] }
    /// Lowercase names of user headers this kind of transfer never sends (it controls them).
    var overriddenHeaders: [String] { [] }
    /// Whether this is an upload (redirect rules, rate option).
    var isUpload: Bool { false }
    /// Called once the final (non-redirect) response's headers are complete.
    func responseHeadersComplete() {}
    /// Turns a finished hop into an outcome; may finish asynchronously. Calls `report`.
    func complete(report: @escaping (AttemptOutcome) -> Void) {}
    /// Stops: called after the handle was removed from the multi.
    func stopped(_ reason: StopReason, then: @escaping () -> Void) { then() }

    // MARK: - Starting

    /// Prepares and starts the attempt. Throws a job error if it cannot start.
    func start() throws {
        try prepare()
        try startHop()
    }

    /// Configures a new easy handle for `currentURL` and adds it to the multi.
    func startHop() throws {
        let e = try CurlEasy()
        easy = e
        status = nil
        headers = []
        headersComplete = false
        let me = Unmanaged.passUnretained(self).toOpaque()
        let req = record.request
        e.set(CURLOPT_URL, currentURL)
        e.set(CURLOPT_PROTOCOLS_STR, "http,https")
        e.set(CURLOPT_FOLLOWLOCATION, 0)  // redirects are followed by RedirectPolicy
        e.set(CURLOPT_USERAGENT, "aftransfer/\(AFTransferVersion.string)")
        e.set(CURLOPT_CONNECTTIMEOUT, 30)
        e.set(CURLOPT_BUFFERSIZE, 256 * 1024)
        e.set(CURLOPT_HEADERDATA, pointer: me)
        e.set(CURLOPT_HEADERFUNCTION, callback: { ptr, size, n, ud in
            guard let ptr, let ud else { return 0 }
            let t = Unmanaged<TransferTask>.fromOpaque(ud).takeUnretainedValue()
            return t.headerLine(ptr, size * n)
        })
        if let rate = req.limitRate.flatMap(RateParser.parse) {
            // Paced by the body callbacks (``pace(_:)``): libcurl 7.88's own limiter is unreliable
            // under the multi-socket API. As the curl CLI does, a buffer no larger than a second's
            // worth keeps the rate smooth.
            limiter = TokenBucket(rate: Double(rate), start: engine.loop.nowMillis)
            e.set(CURLOPT_BUFFERSIZE, Int(min(Int64(256 * 1024), max(1024, rate))))
            if isUpload { e.set(CURLOPT_UPLOAD_BUFFERSIZE, Int(min(Int64(2 << 20), max(16 * 1024, rate)))) }
        }
        if sendCredentials, let user = req.user {
            e.set(CURLOPT_USERPWD, user)
            e.set(CURLOPT_HTTPAUTH, 1)  // CURLAUTH_BASIC (a macro Swift cannot import)
        }
        if let cacert = req.cacert { e.set(CURLOPT_CAINFO, cacert) }
        if let pin = req.pinPubkey { e.set(CURLOPT_PINNEDPUBLICKEY, pin) }
        if req.insecure == true {
            e.set(CURLOPT_SSL_VERIFYPEER, 0)
            e.set(CURLOPT_SSL_VERIFYHOST, 0)
        }
        // Checked before the request is sent, on a fresh connection (PinnedCertificate).
        if req.pinCert != nil { PinnedCertificate.enforce(on: e, task: me) }
        let extra = extraHeaders()
        let owned = Set(extra.compactMap { $0.split(separator: ":").first?.lowercased() } + overriddenHeaders)
        var lines: [String] = []
        for h in req.headers ?? [] {
            guard let f = try? HeaderField.parse(h) else { continue }
            if !sendCredentials && f.isSecret { continue }
            if owned.contains(f.name.lowercased()) { continue }
            lines.append("\(f.name): \(f.value)")
        }
        lines.append(contentsOf: extra)
        e.setHeaders(lines)
        configureBody(e)
        if !e.refusedOptions.isEmpty {
            Log.info("libcurl refused options \(e.refusedOptions)", job: jobId)
        }
        guard engine.multi.add(e.handle) else {
            throw TransferError(.io, "cannot add the transfer to libcurl", retryable: true)
        }
        isInMulti = true
        engine.register(self, easy: e.handle)
    }

    // MARK: - Headers

    func headerLine(_ p: UnsafeMutablePointer<CChar>, _ n: Int) -> Int {
        lastProgressAt = engine.loop.nowMillis
        let raw = UnsafeRawBufferPointer(start: p, count: n)
        let line = String(decoding: raw, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        if line.hasPrefix("HTTP/") {
            let parts = line.split(separator: " ", maxSplits: 2)
            status = parts.count > 1 ? Int(parts[1]) : nil
            headers = []
            headersComplete = false
        } else if line.isEmpty {
            // End of one response's headers; 1xx responses are followed by another.
            if let s = status, s >= 200 {
                headersComplete = true
                if !(300..<400).contains(s) || header("location") == nil {
                    // Belt and braces: the prerequest check has already passed for this hop.
                    if let pin = record.request.pinCert, !PinnedCertificate.chainContains(easy: easy, pemFile: pin) {
                        abortError = PinnedCertificate.mismatch
                        return 0
                    }
                    responseHeadersComplete()
                    if abortError != nil { return 0 }
                }
            }
        } else if let colon = line.firstIndex(of: ":") {
            let name = line[..<colon].trimmingCharacters(in: .whitespaces).lowercased()
            let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            headers.append((name, value))
        }
        return n
    }

    /// The value of response header `name` (lowercase) of the current response.
    func header(_ name: String) -> String? {
        headers.last(where: { $0.0 == name })?.1
    }

    /// Whether the current response is a redirect this task must handle.
    var isRedirect: Bool {
        guard let s = status else { return false }
        return (300..<400).contains(s) && s != 304 && header("location") != nil
    }

    // MARK: - Finishing

    /// Called by the engine when the multi reports this hop done (the handle was removed).
    func finish(code: CURLcode) {
        isInMulti = false
        if let abortError {
            complete(failure: abortError)
            return
        }
        if code != CURLE_OK {
            let msg = easy?.errorMessage ?? ""
            let text = msg.isEmpty ? String(cString: curl_easy_strerror(code)) : msg
            complete(failure: CurlErrorClassifier.error(curlCode: Int32(code.rawValue), message: text))
            return
        }
        if isRedirect, let s = status {
            let location = easy?.info(string: CURLINFO_REDIRECT_URL)
            switch RedirectPolicy.next(from: currentURL, location: location, status: s, followed: redirectsFollowed, isUpload: isUpload) {
            case .failure(let err):
                complete(failure: err)
            case .success(let next):
                if !RedirectPolicy.sameOrigin(currentURL, next) { sendCredentials = false }
                Log.info("redirect \(s) to \(URLRedaction.redact(next))", job: jobId)
                redirectsFollowed += 1
                currentURL = next
                do { try startHop() } catch let e as TransferError { complete(failure: e) } catch {
                    complete(failure: TransferError(.io, "\(error)", retryable: true))
                }
            }
            return
        }
        complete { outcome in self.engine.attemptEnded(self, outcome) }
    }

    /// Ends the attempt with an error.
    func complete(failure: TransferError) {
        // SPEC: Retry-After is honoured (as a minimum) on 429 and 503.
        let retryAfter = (status == 429 || status == 503)
            ? header("retry-after").flatMap { RetryPolicy.parseRetryAfter($0, now: Date()) } : nil
        failed(failure) {
            self.engine.attemptEnded(self, .failed(failure, retryAfter: retryAfter))
        }
    }

    /// Subclass cleanup after a failed attempt (checkpoint, close files), then `then`.
    func failed(_ error: TransferError, then: @escaping () -> Void) { then() }

    /// The timeline of the last hop, into an attempt record.
    func fillTimeline(_ a: inout AttemptRecord) {
        guard let e = easy else { return }
        a.nameLookup = e.info(double: CURLINFO_NAMELOOKUP_TIME)
        a.connect = e.info(double: CURLINFO_CONNECT_TIME)
        a.tls = e.info(double: CURLINFO_APPCONNECT_TIME)
        a.firstByte = e.info(double: CURLINFO_STARTTRANSFER_TIME)
        a.total = e.info(double: CURLINFO_TOTAL_TIME)
    }

    // MARK: - Rate limit

    var limiter: TokenBucket?
    private var unpauseTimer: LoopTimer?

    /// Whether `n` more bytes may pass now under `--limit-rate`. When not, the caller returns
    /// libcurl's PAUSE code and a loop timer resumes the transfer when the budget allows (never
    /// `curl_easy_pause` from inside a callback).
    func pace(_ n: Int) -> Bool {
        guard var bucket = limiter else { return true }
        let wait = bucket.delay(now: engine.loop.nowMillis)
        if wait > 0 {
            if unpauseTimer == nil { unpauseTimer = LoopTimer(loop: engine.loop) }
            if unpauseTimer?.isActive != true {
                unpauseTimer?.start(after: wait) { [weak self] in
                    guard let self, self.isInMulti, let e = self.easy else { return }
                    curl_easy_pause(e.handle, CURLPAUSE_CONT)
                }
            }
            return false
        }
        bucket.consumed += Int64(n)
        limiter = bucket
        return true
    }

    /// Counts progress (call from body callbacks).
    func progressed(to newBytes: Int64) {
        bytes = newBytes
        lastProgressAt = engine.loop.nowMillis
    }
}

/// A byte budget growing at `rate` per second from `start` (ms, loop time).
struct TokenBucket {
    let rate: Double
    let start: UInt64
    var consumed: Int64 = 0

    /// Milliseconds until the bytes consumed so far fit the budget; 0 when they do.
    func delay(now: UInt64) -> UInt64 {
        let allowed = rate * Double(now &- start) / 1000
        let excess = Double(consumed) - allowed
        return excess > 0 ? UInt64((excess / rate * 1000).rounded(.up)) : 0
    }
}

/// A smoothed transfer rate (exponentially weighted), sampled by the engine's tick.
public struct RateMeter {
    private var lastBytes: Int64?
    private var lastTime: UInt64 = 0
    /// Bytes per second.
    public private(set) var value: Double = 0

    /// Adds a sample of the byte count at loop time `now` (ms).
    public mutating func sample(bytes: Int64, now: UInt64) {
        defer {
            lastBytes = bytes
            lastTime = now
        }
        guard let lb = lastBytes, now > lastTime else { return }
        let dt = Double(now - lastTime) / 1000
        let inst = Double(max(0, bytes - lb)) / dt
        value = value == 0 ? inst : value * 0.7 + inst * 0.3
    }
}
