import Foundation

/// One attempt of a job: a request (a new easy handle per redirect hop), the response's headers,
/// live progress, and the attempt's ``AttemptPhase``. Subclasses handle the body
/// (``DownloadTask``, ``UploadTask``). Kept alive by the engine while it runs; the easy handle's
/// callbacks hold it unowned. Loop-thread only.
class TransferTask {
    /// The job's id.
    let jobId: Int64
    /// The job's row, kept in step with every change the attempt or the engine writes.
    var record: JobRecord
    unowned let engine: AttemptHost
    /// Where the attempt is.
    var phase: AttemptPhase = .preparing
    /// Whether control commands on the job wait for this attempt's end (``Engine/control(_:ids:deleteFiles:answer:)``):
    /// its response is complete and it is being verified and put in place.
    var holdsCommands: Bool { phase == .finishing }
    /// The current easy handle (a new one per redirect hop).
    private(set) var easy: CurlEasy?
    /// Whether this attempt's requests go on new connections only: the job's last attempt failed
    /// on a kept-alive one, which may hold an earlier answer's leftovers (set by the engine).
    var freshConnection = false
    /// Whether the attempt failed with a `network` error on a kept-alive connection (the engine
    /// gives the job's next attempt a new one).
    private(set) var failedOnReusedConnection = false
    /// The URL of the current hop.
    private(set) var currentURL: String {
        didSet { hostKey = Self.hostKey(of: currentURL) }
    }
    /// `scheme://host:port` of the current hop (connections to one host are capped, all jobs
    /// together: `--max-per-host`).
    private(set) var hostKey: String
    private var redirectsFollowed = 0
    /// Whether credentials still apply (dropped after a redirect to another origin).
    private var sendCredentials = true
    /// This attempt's entry in the job's history and its position there.
    var historyEntry: AttemptRecord
    var historySeq = 0

    // Response of the current hop.
    private(set) var status: Int?
    /// Whether the open history entry's request was handed to libcurl (``easy`` is its handle).
    private var entrySent = true
    private(set) var headers: [(String, String)] = []

    // Live progress.
    /// Bytes on disk (download) or sent (upload), counting resumed bytes.
    var bytes: Int64 = 0
    /// The size, once known.
    var total: Int64?
    /// Loop time (ms) when bytes last moved.
    var lastProgressAt: UInt64
    /// The start (loop ms) of the current window of the average-rate stall check, and the bytes
    /// then: nil until the engine's tick first looks.
    private var stallMark: (at: UInt64, bytes: Int64)?
    /// The smoothed rate, sampled by the engine's tick.
    var rate = RateMeter()
    /// An error found in a callback that ends the attempt.
    var abortError: TransferError?

    init(engine: AttemptHost, record: JobRecord) {
        self.engine = engine
        self.record = record
        self.jobId = record.id ?? 0
        self.currentURL = record.url
        self.hostKey = Self.hostKey(of: record.url)
        self.lastProgressAt = engine.loop.nowMillis
        self.attemptStartedAt = engine.loop.nowMillis
        self.historyEntry = AttemptRecord(attempt: record.attempts, startedAt: "")
    }

    /// When the attempt began (loop time, ms).
    private(set) var attemptStartedAt: UInt64

    // MARK: - Standing by

    /// Whether the attempt stands by (``startStandingBy()``): its request is out, its response held.
    private(set) var standingBy = false

    /// Starts the attempt of a job that is still queued, for a slot about to be given back (the
    /// engine's standby): the request goes out now and its response is held (kept by the curl layer),
    /// unread, until ``goOn()`` — nothing of it reaches the job before then. Throws as ``start()``.
    func startStandingBy() throws {
        standingBy = true
        try start()
    }

    /// The job has its slot now (it is `running`): the held response is read from here as any
    /// other — once the engine is done starting the job — and a request that failed meanwhile
    /// ends the attempt then, as its failure.
    func goOn() {
        guard standingBy else { return }
        standingBy = false
        attemptStartedAt = engine.loop.nowMillis
        lastProgressAt = attemptStartedAt
        if let easy { engine.multi.release(easy) }
    }

    /// Writes a change to the job's row (and to ``record``).
    func write(_ patch: JobPatch) { engine.write(jobId, patch) }

    // MARK: - Subclass hooks

    /// Prepares files and state before the first request. Throws a job error.
    func prepare() throws {}
    /// Adds what this kind of transfer sends to a hop's options and callbacks.
    func configure(_ options: inout CurlRequestOptions, _ easy: CurlEasy) {}
    /// Extra request headers for this hop; they replace user headers of the same name.
    func extraHeaders() -> [String] { [] }
    /// Lowercase names of user headers this kind of transfer never sends (it controls them).
    var overriddenHeaders: [String] { [] }
    /// Whether this is an upload (redirect rules).
    var isUpload: Bool { false }
    /// Called once the final (non-redirect) response's headers are complete.
    func responseHeadersComplete() {}
    /// Called once an interim (1xx) response's headers are complete (``header(_:)`` reads them).
    func interimResponseComplete() {}
    /// Called when a final response is complete, before it is turned into an outcome: true when
    /// the subclass took it over (started another request, or ended the attempt itself).
    func followUp() -> Bool { false }
    /// Turns a finished response into an outcome; may finish asynchronously. Calls `report`.
    func complete(report: @escaping (AttemptOutcome) -> Void) {}
    /// Cleanup after a failed attempt (checkpoint, close files), then `then`.
    func failed(_ error: TransferError, then: @escaping () -> Void) { then() }
    /// Cleanup after the engine stopped the attempt (its handle is already out of the multi).
    func stopped(_ reason: StopReason, then: @escaping () -> Void) { then() }
    /// Synchronous checkpoint at shutdown.
    func checkpointNow() {}
    /// The current hop's handle is done (out of the multi) without an abort reason: true when the
    /// subclass takes it from here (a segmented download whose other connections go on).
    func hopEnded(error: TransferError?) -> Bool { false }
    /// `scheme://host:port` of a URL (the default port of its scheme when none is given).
    static func hostKey(of url: String) -> String {
        guard let c = URLComponents(string: url) else { return url }
        let scheme = c.scheme?.lowercased() ?? ""
        let port = c.port ?? (scheme == "https" ? 443 : 80)
        return "\(scheme)://\(c.host?.lowercased() ?? ""):\(port)"
    }

    /// Connections open now (the job object's `connections`).
    var openConnections: Int { phase == .transferring && easy?.engaged == true ? 1 : 0 }
    /// TCP connections held to ``hostKey`` (`--max-per-host`): one for several HTTP/2 streams.
    var hostConnections: Int { phase == .transferring ? 1 : 0 }
    /// A segmented download's ranges (`transfer.segments`); nil otherwise.
    var segmentProgress: [SegmentProgress]? { nil }

    // MARK: - Starting and stopping

    /// Prepares and starts the attempt. Throws a job error if it cannot start.
    func start() throws {
        try prepare()
        try startHop()
    }

    /// Configures a new easy handle for `currentURL` and adds it to the multi.
    func startHop() throws {
        let e = try CurlEasy()
        easy = e
        entrySent = true
        status = nil
        headers = []
        var o = requestOptions(for: e, extraHeaders: extraHeaders(), overridden: overriddenHeaders)
        e.onHeader = { [unowned self] line in self.headerLine(line) }
        e.onDone = { [unowned self] error in self.finish(error: error) }
        configure(&o, e)
        e.configure(o)
        if !e.refusedOptions.isEmpty {
            Log.info("libcurl refused options \(e.refusedOptions)", job: jobId)
        }
        guard standingBy ? engine.multi.addHolding(e) : engine.multi.add(e) else {
            throw TransferError(.io, "cannot add the transfer to libcurl", retryable: true)
        }
        phase = .transferring
    }

    /// The options of a request to the current hop's URL: the job's credentials (unless a
    /// redirect left their origin), TLS settings, pacing, and its headers with `extraHeaders`
    /// replacing user headers of the same name (and of the `overridden` lowercase names).
    /// Also used for a segmented download's further connections (``SegmentConnection``).
    func requestOptions(for e: CurlEasy, extraHeaders extra: [String], overridden: [String]) -> CurlRequestOptions {
        let req = record.request
        let owned = Set(extra.compactMap { $0.split(separator: ":").first?.lowercased() } + overridden)
        var o = CurlRequestOptions.job(
            req, url: currentURL, origin: record.url, sendCredentials: sendCredentials, owned: owned)
        o.freshConnection = freshConnection
        if let rate = req.limitRate.flatMap(RateParser.parse) {
            // Paced by the body callbacks (``pace(_:)``): libcurl 7.88's own limiter is unreliable
            // under the multi-socket API. As the curl CLI does, a buffer no larger than a second's
            // worth keeps the rate smooth.
            if limiter == nil { limiter = TokenBucket(rate: Double(rate), start: engine.loop.nowMillis) }
            o.bufferSize = Int(min(Int64(CurlRequestOptions.defaultBufferSize), max(1024, rate)))
        }
        if !isUpload, let shared = engine.bandwidth.download.rate {
            // Under the daemon-wide limit, a quarter of a second's worth a callback keeps the
            // budget's turns short and fair between transfers.
            o.bufferSize = min(o.bufferSize, Int(max(16 * 1024, shared / 4)))
        }
        if let pin = req.pinCert {
            // Checked before the request is sent, on a fresh connection (PinnedCertificate).
            o.inspectsCertificates = true
            e.onPrerequest = { [unowned self, unowned e] in
                if PinnedCertificate.chainContains(easy: e, pemFile: pin) { return true }
                self.abortError = PinnedCertificate.mismatch
                return false
            }
        }
        o.headers.append(contentsOf: extra)
        return o
    }

    /// The engine stops the attempt: out of the multi, and every later callback ignored.
    func halt() {
        if phase == .transferring, let e = easy { engine.multi.remove(e) }
        phase = .ended
        stopPacing()
    }

    /// No more turns at the shared budget, and no unpause to come.
    private func stopPacing() {
        unpauseTimer?.close()
        unpauseTimer = nil
        engine.bandwidth.download.forget(ObjectIdentifier(self))
        engine.bandwidth.upload.forget(ObjectIdentifier(self))
    }

    // MARK: - Stalls

    /// Whether the attempt has stalled at loop time `now` (SPEC: under 1 byte/s for the stall
    /// window): no byte for a whole window, or fewer bytes than the window has seconds in the last
    /// full window (a trickle that never goes silent). Called by the engine's tick.
    func stalled(now: UInt64, window: UInt64) -> Bool {
        if easy?.engaged == false || isHeldByLimit {
            // Waiting for a free connection to its host (`--max-per-host`), or held back by a
            // rate limit until its budget allows more (16 KiB under a daemon-wide 300 B/s is
            // almost a minute): not a stall.
            restartStallWindow(now: now)
            return false
        }
        if now &- lastProgressAt > window { return true }
        guard let mark = stallMark else {
            stallMark = (now, bytes)
            return false
        }
        guard now &- mark.at >= window else { return false }
        stallMark = (now, bytes)
        return bytes - mark.bytes < Int64(window / 1000)
    }

    /// Held back on purpose (a bandwidth budget, a wait the server asked for): both stall windows
    /// start again.
    func restartStallWindow(now: UInt64) {
        lastProgressAt = now
        stallMark = nil
    }

    // MARK: - Headers

    private func headerLine(_ raw: UnsafeRawBufferPointer) -> Bool {
        lastProgressAt = engine.loop.nowMillis
        switch HeaderLine.parse(raw) {
        case .status(let code):
            status = code
            headers = []
            if let code, code >= 200 { easy?.finalResponseBegan() }
        case .end:
            // End of one response's headers; 1xx responses are followed by another.
            if let s = status, s >= 200, !((300..<400).contains(s) && header("location") != nil) {
                // Belt and braces: the prerequest check has already passed for this hop.
                if let pin = record.request.pinCert, !PinnedCertificate.chainContains(easy: easy, pemFile: pin) {
                    abortError = PinnedCertificate.mismatch
                    return false
                }
                responseHeadersComplete()
                if abortError != nil { return false }
            } else if let s = status, s < 200 {
                interimResponseComplete()
            }
        case .field(let name, let value):
            headers.append((name, value))
        case .other:
            break
        }
        return true
    }

    /// The value of response header `name` (lowercase) of the current response.
    func header(_ name: String) -> String? {
        headers.last(where: { $0.0 == name })?.1
    }

    /// The current response's body length as announced: its `Content-Length`, unless it has a
    /// `Transfer-Encoding` too, which overrides it (RFC 9112 §6.3; libcurl reads such a body by its
    /// chunks). Taken as the length, the ignored header failed every attempt of a whole body.
    var announcedLength: Int64? {
        guard header("transfer-encoding") == nil else { return nil }
        return header("content-length").flatMap { Int64($0) }
    }

    /// Whether the current response is a redirect this task must handle.
    private var isRedirect: Bool {
        guard let s = status else { return false }
        return (300..<400).contains(s) && s != 304 && header("location") != nil
    }

    // MARK: - Finishing

    /// The multi reports this hop done (the handle is already out of the multi).
    private func finish(error: TransferError?) {
        guard phase == .transferring else { return }
        if error?.code == .network, easy?.reusedConnection == true { failedOnReusedConnection = true }
        if abortError == nil && hopEnded(error: error) { return }
        if let abortError {
            complete(failure: abortError)
            return
        }
        if let error {
            complete(failure: error)
            return
        }
        if isRedirect, let s = status {
            switch RedirectPolicy.next(
                from: currentURL, location: easy?.redirectURL, status: s, followed: redirectsFollowed,
                isUpload: isUpload)
            {
            case .failure(let err):
                complete(failure: err)
            case .success(let next):
                if !RedirectPolicy.sameOrigin(currentURL, next) { sendCredentials = false }
                Log.info("redirect \(s) to \(URLRedaction.redact(next))", job: jobId)
                redirectStatus = s
                redirectsFollowed += 1
                currentURL = next
                do { try startHop() } catch {
                    complete(failure: TransferError.from(error, retryable: true))
                }
            }
            return
        }
        if followUp() { return }
        finishAttempt()
    }

    /// The response is complete: verifies and reports (``complete(report:)``).
    func finishAttempt() {
        phase = .finishing
        engine.attemptFinishing()
        complete { outcome in self.report(outcome) }
    }

    /// Starts another request of the same attempt to `url` (a resumable upload's next step):
    /// redirects are counted afresh, credentials go along only to the job's origin.
    func startRequest(url: String) throws {
        redirectsFollowed = 0
        redirectStatus = nil
        sendCredentials = RedirectPolicy.sameOrigin(record.url, url)
        currentURL = url
        try startHop()
    }

    /// Closes the history entry of the request that just ended and opens the next one (SPEC:
    /// each request of a resumable upload is one entry in `history`).
    func beginNextHistoryEntry() {
        if let s = lastStatus { earlierStatus = s }
        closeHistory(error: nil)
        engine.recordHistory(self)
        record.history.append(historyEntry)
        historySeq += 1
        historyEntry = AttemptRecord(
            attempt: record.attempts, startedAt: Timestamp.rfc3339(Timestamp.now()), bytes: bytes)
        // The entry's status and timeline are its own request's: none until it is sent (a source
        // found changed before an append ends the attempt in an entry with neither).
        status = nil
        redirectStatus = nil
        entrySent = false
        engine.recordHistory(self)
    }

    /// Ends the attempt with an error; `retryAfter` is the server's wait in seconds when another
    /// response than this task's last one asked for it (a range's), else that response's own.
    func complete(failure: TransferError, retryAfter given: Double? = nil, retrySpent: Bool = false) {
        guard phase != .ended else { return }
        let retryAfter = given ?? RetryPolicy.retryAfter(status: status, value: header("retry-after"))
        if phase == .transferring, let e = easy { engine.multi.remove(e) }
        phase = .finishing
        failed(failure) { self.report(.failed(failure, retryAfter: retryAfter, retrySpent: retrySpent)) }
    }

    /// Tells the engine once, unless it stopped the attempt meanwhile.
    private func report(_ outcome: AttemptOutcome) {
        guard phase != .ended else { return }
        phase = .ended
        stopPacing()
        engine.attemptEnded(self, outcome)
    }

    /// The last hop's status and timeline, and the bytes so far, written into the history entry.
    func closeHistory(error: TransferError?) {
        if entrySent, let t = easy?.timeline {
            historyEntry.nameLookup = t.nameLookup
            historyEntry.connect = t.connect
            historyEntry.tls = t.tls
            historyEntry.firstByte = t.firstByte
            historyEntry.total = t.total
        }
        historyEntry.endedAt = Timestamp.rfc3339(Timestamp.now())
        historyEntry.httpStatus = responseStatus
        historyEntry.bytes = bytes
        historyEntry.error = error
    }

    /// Records `code` as the last response's status: a further connection's response that ends
    /// the attempt (a segmented download's range refused) is the job's last response.
    func noteFinalStatus(_ code: Int) { status = code }

    /// The HTTP status of the last final response, if any (an interim 1xx is not one).
    var lastStatus: Int? { status.flatMap { $0 >= 200 ? $0 : nil } }
    /// The status of an earlier request's answer in this attempt (a resumable upload's offset
    /// query, before its append): the attempt's last response until the request in flight has one.
    private(set) var earlierStatus: Int?
    /// The attempt's last response status (the job object's `httpStatus` while it runs).
    var attemptStatus: Int? { responseStatus ?? earlierStatus }
    /// The last final response of the request under way: its hop's, else the redirect that led
    /// to it (a next hop that fails before it answers, say its TLS, leaves that one the last).
    var responseStatus: Int? { lastStatus ?? redirectStatus }
    /// The status of the last redirect this request followed, nil before one.
    private var redirectStatus: Int?
    /// The status of the response being read, interim (1xx) ones included.
    var currentStatus: Int? { status }

    // MARK: - Rate limit

    private(set) var limiter: TokenBucket?
    private var unpauseTimer: LoopTimer?

    /// Whether `n` more bytes may pass now under `--limit-rate` and the daemon-wide limit of this
    /// direction (``BandwidthGovernor``). When not, the caller pauses the transfer and a loop
    /// timer resumes it when both budgets allow (never from inside a callback).
    func pace(_ n: Int) -> Bool {
        let now = engine.loop.nowMillis
        let shared = isUpload ? engine.bandwidth.upload : engine.bandwidth.download
        var wait = limiter?.delay(now: now) ?? 0
        if wait == 0 {
            wait = shared.delay(now: now, for: ObjectIdentifier(self))
            // Held back by the shared budget, not stalled: the stall window restarts.
            if wait > 0 { restartStallWindow(now: now) }
        } else {
            shared.hold(ObjectIdentifier(self), until: now + wait)  // its own limit, not its turn
        }
        if wait > 0 {
            if unpauseTimer == nil { unpauseTimer = LoopTimer(loop: engine.loop) }
            if unpauseTimer?.isActive != true {
                unpauseTimer?.start(after: wait) { [weak self] in
                    guard let self, self.phase == .transferring else { return }
                    self.resumePaced()
                }
            }
            return false
        }
        limiter?.take(n, now: now)
        shared.take(n, by: ObjectIdentifier(self))
        return true
    }

    /// Whether a rate limit holds the transfer back now (``pace(_:)`` paused it until its budget
    /// allows more).
    var isHeldByLimit: Bool { unpauseTimer?.isActive == true }

    /// Ends a hold of ``pace(_:)`` now (the limits changed): the transfer is resumed and asks its
    /// budgets again with its next bytes.
    func wakeFromLimit() {
        guard isHeldByLimit, phase == .transferring else { return }
        unpauseTimer?.stop()
        resumePaced()
    }

    /// Resumes what ``pace(_:)`` paused (a segmented download resumes each of its connections).
    func resumePaced() {
        if let easy { engine.multi.unpause(easy) }
    }

    /// Counts progress (call from body callbacks).
    func progressed(to newBytes: Int64) {
        bytes = newBytes
        lastProgressAt = engine.loop.nowMillis
    }
}

/// A transfer's own `--limit-rate`: a token bucket that fills at `rate` bytes a second up to
/// ``burst`` (one second's worth) and that each callback's bytes are taken from, into debt. Time
/// spent below the rate — held back by the daemon-wide limit, or by a slow server — saves up at
/// most a second's worth: an unbounded credit let a job that had been held for a minute then take
/// a minute's worth at full speed (found by an outside audit), where `curl --limit-rate` keeps to
/// its rate.
struct TokenBucket {
    /// Bytes per second.
    let rate: Double
    /// The most bytes saved up while the transfer ran below its rate.
    let burst: Double
    /// Bytes that may pass now (negative: owed), as of `last`.
    private var tokens: Double = 0
    /// When (ms, loop time) `tokens` was last brought up to date.
    private var last: UInt64

    /// A bucket for `rate` bytes a second, empty at `start` (ms, loop time).
    init(rate: Double, start: UInt64) {
        self.rate = rate
        self.burst = rate
        self.last = start
    }

    /// The tokens at loop time `now`.
    private func level(at now: UInt64) -> Double {
        min(burst, tokens + rate * Double(now &- last) / 1000)
    }

    /// Milliseconds until the bytes taken so far fit the budget; 0 when they do.
    func delay(now: UInt64) -> UInt64 {
        let owed = -level(at: now)
        return owed > 0 ? UInt64((owed / rate * 1000).rounded(.up)) : 0
    }

    /// Takes `n` bytes at loop time `now` (the budget may go into debt by one callback's bytes).
    mutating func take(_ n: Int, now: UInt64) {
        tokens = level(at: now) - Double(n)
        last = now
    }
}

/// A smoothed transfer rate (exponentially weighted), sampled by the engine's tick.
public struct RateMeter {
    private var lastBytes: Int64?
    private var lastTime: UInt64 = 0
    /// The weighted average, nil before the first interval.
    private var smoothed: Double?
    /// Bytes per second. The average only tends to 0 when nothing comes: under a byte a second it
    /// is shown as 0, so that a stalled transfer's ETA is unknown rather than 1e19 s (an outside
    /// audit); the average itself goes on, so the next bytes are smoothed as before.
    public var value: Double {
        guard let smoothed, smoothed >= 1 else { return 0 }
        return smoothed
    }

    /// Adds a sample of the byte count at loop time `now` (ms).
    public mutating func sample(bytes: Int64, now: UInt64) {
        defer {
            lastBytes = bytes
            lastTime = now
        }
        guard let lb = lastBytes, now > lastTime else { return }
        let dt = Double(now - lastTime) / 1000
        let inst = Double(max(0, bytes - lb)) / dt
        smoothed = smoothed.map { $0 * 0.7 + inst * 0.3 } ?? inst
    }
}
