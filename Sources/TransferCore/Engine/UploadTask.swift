import Foundation

/// One attempt of an upload (SPEC "Uploads"): a file, or a multipart/form-data body built by
/// ``MultipartFormData``, streamed from disk through `CURLOPT_READFUNCTION` with a
/// `Content-Length`, hashed as it is sent; the response validated (2xx) and its body saved to
/// `--response FILE` (through `FILE.aftpart` and a rename) or kept with the job (64 KiB).
///
/// The requests of an attempt are decided by a ``ResumableUploadPlan`` (SPEC "Resumable
/// uploads"): a plain upload, or an IETF/tus creation, `HEAD` and `PATCH`es from the server's
/// offset; what the plan learns (upload URL, protocol, offset, append limit) is written to the job
/// as it is learnt, the upload URL from the `104` in the header callback. A plain upload, every
/// creation and every redirect hop (307/308) sends the payload from byte 0. The sources are
/// checked against their size and mtime at enqueue before each attempt, before every request with
/// bytes, when each file is opened and after it was read: a difference is `source_changed`, which
/// is not retried.
/// Loop-thread only.
final class UploadTask: TransferTask {
    /// How much of a response body is kept with the job when it is not saved to a file.
    static let keptResponseBytes = 64 * 1024
    /// libcurl's upload buffer: how much one read callback may fill.
    static let uploadBufferSize = 512 * 1024

    /// The payload of this attempt.
    private var body: UploadBodyStream?
    /// The request's `Content-Type`.
    private var contentType = MIMEType.fallback
    private var hasher = Sha256()
    /// A plain file's digest, computed on libuv's pool from the file itself (the payload is the
    /// file): the loop does not spend its time hashing. Nil for forms, which hash inline.
    private var fileHasher: RangeHasher?
    /// `--response FILE`, written through `FILE.aftpart`.
    private var responsePart: PartFile?
    /// Whether the current response's body goes to ``responsePart``.
    private var bodyToFile = false
    /// Whether the current response is the final one (its body is captured at all).
    private var keepBody = false
    private var responseBytes: Int64 = 0
    /// The first ``keptResponseBytes`` of the response body, when it is not saved to a file.
    private var keptBody = Data()

    /// The resumable protocol's decisions (a plain upload with `off` and for forms).
    private var plan: ResumableUploadPlan?
    /// Waits before asking the server's offset again after `409`s in a row.
    private var conflictTimer: LoopTimer?
    /// The request in flight, as the plan asked for it.
    private var request: ResumableUploadPlan.Request?
    /// `--sha256`, once the source was checked against it before the first byte: the digest.
    private var verifiedDigest: String?
    /// The check of `--sha256` under way on libuv's pool.
    private var precheck: RangeHasher?

    /// Whether the server has answered, with a 2xx, the request that carried the upload's last
    /// byte (until the next request): the upload is done on the server, however long the rest
    /// of the answer takes.
    private var lastByteAnswered = false

    override var isUpload: Bool { true }

    /// Commands wait from the server's 2xx to the request with the last byte, not only from the
    /// answer's end: a `cancel` in between sent `DELETE` to a finished upload, and a `pause` lost
    /// its response (a resumed attempt's `HEAD` answer took its place).
    override var holdsCommands: Bool { super.holdsCommands || lastByteAnswered }

    // MARK: - Sources

    /// What `transfer.add` records about an upload's sources (SPEC "Uploads": "If the source file
    /// changed (size or mtime) since enqueue, the job fails with `source_changed`").
    struct SourceInfo {
        /// The job's `destination`: the source file, nil for a multipart form.
        var path: String?
        /// The file's size; for a form, the sum of its files' sizes.
        var size: Int64
        /// The file's mtime; for a form, the latest mtime of its files (nil without files).
        var modificationTime: Double?
        /// The payload's length (the whole encoded body of a form).
        var payloadLength: Int64
        /// Each file's size and mtime, in order.
        var stamps: [SourceStamp] = []
    }

    /// The seconds since 1970 of a `stat`'s mtime, computed the same way everywhere so that
    /// stored values compare equal.
    static func modificationTime(_ st: stat) -> Double {
        Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
    }

    /// Stats an upload's sources at enqueue (the request is already validated).
    ///
    /// - Throws: `TransferError` (`invalid_request`) if a file cannot be looked at.
    static func inspectSources(of request: TransferRequest) throws -> SourceInfo {
        if let form = request.form {
            let parts = try form.map(FormPart.parse)
            var size: Int64 = 0
            var mtime: Double?
            var lengths: [Int64] = []
            var stamps: [SourceStamp] = []
            for case .file(let name, let path, _, _) in parts {
                let st = try statForEnqueue(path, field: "form \(name)")
                size += Int64(st.st_size)
                lengths.append(Int64(st.st_size))
                mtime = max(mtime ?? -.infinity, modificationTime(st))
                stamps.append(SourceStamp(path: path, size: Int64(st.st_size), mtime: modificationTime(st)))
            }
            // The encoded length depends on the boundary's length only, which is fixed.
            let payload = makeForm(parts, fileLengths: lengths, boundary: MultipartFormData.randomBoundary())
            return SourceInfo(
                path: nil, size: size, modificationTime: mtime, payloadLength: payload.contentLength, stamps: stamps)
        }
        guard let source = request.source else {
            throw TransferError(
                .invalidRequest, "source: an upload needs a source file or form parts", retryable: false)
        }
        let st = try statForEnqueue(source, field: "source")
        return SourceInfo(
            path: source, size: Int64(st.st_size), modificationTime: modificationTime(st),
            payloadLength: Int64(st.st_size),
            stamps: [SourceStamp(path: source, size: Int64(st.st_size), mtime: modificationTime(st))])
    }

    private static func statForEnqueue(_ path: String, field: String) throws -> stat {
        var st = stat()
        guard stat(path, &st) == 0 else {
            throw TransferError(
                .invalidRequest, "\(field): cannot read \(path): \(String(cString: strerror(errno)))", retryable: false)
        }
        return st
    }

    private static func makeForm(_ parts: [FormPart], fileLengths: [Int64], boundary: String) -> MultipartFormData {
        let form = MultipartFormData(boundary: boundary)
        var lengths = fileLengths.makeIterator()
        for part in parts {
            if case .file = part {
                form.append(part, fileLength: lengths.next() ?? 0)
            } else {
                form.append(part)
            }
        }
        return form
    }

    /// Stats a source before an attempt: a missing file is `source_changed` (it was there at
    /// enqueue), another failure `io`.
    private func statSource(_ path: String) throws -> stat {
        var st = stat()
        guard stat(path, &st) == 0 else {
            let e = errno
            if e == ENOENT || e == ENOTDIR {
                throw TransferError(.sourceChanged, "\(path) no longer exists", retryable: false)
            }
            throw FileErrors.error(e, "cannot read \(path)")
        }
        guard st.st_mode & S_IFMT == S_IFREG else {
            throw TransferError(.sourceChanged, "\(path) is no longer a regular file", retryable: false)
        }
        return st
    }

    private func sourceChanged(_ what: String) -> TransferError {
        TransferError(.sourceChanged, "\(what) changed since the upload was queued", retryable: false)
    }

    // MARK: - Preparing

    override func prepare() throws {
        let req = record.request
        let userType = HeaderField.last(named: "content-type", in: req.headers)?.value
        if let form = req.form {
            let parts = try form.map { spec -> FormPart in
                do { return try FormPart.parse(spec) } catch {
                    throw TransferError(.invalidRequest, "form: cannot parse \(spec)", retryable: false)
                }
            }
            var lengths: [Int64] = []
            var times: [String: Double] = [:]
            var size: Int64 = 0
            var latest: Double?
            var index = 0
            for case .file(_, let path, _, _) in parts {
                let st = try statSource(path)
                let mtime = Self.modificationTime(st)
                if let stamps = record.sources, index < stamps.count {
                    // Each file against its own stamp (rows from before migration v2 have none).
                    if stamps[index].size != Int64(st.st_size) || stamps[index].mtime != mtime {
                        throw sourceChanged(path)
                    }
                }
                index += 1
                lengths.append(Int64(st.st_size))
                times[path] = mtime
                size += Int64(st.st_size)
                latest = max(latest ?? -.infinity, mtime)
            }
            if let recorded = record.sourceSize, recorded != size { throw sourceChanged("a file of the form") }
            if let recorded = record.sourceMtime, recorded != latest { throw sourceChanged("a file of the form") }
            let multipart = Self.makeForm(parts, fileLengths: lengths, boundary: MultipartFormData.randomBoundary())
            body = UploadBodyStream(segments: multipart.segments, modificationTimes: times)
            // A user's multipart type keeps its name and gets our boundary, as curl does.
            if let userType, userType.lowercased().hasPrefix("multipart/") {
                contentType = "\(userType); boundary=\(multipart.boundary)"
            } else {
                contentType = multipart.contentType
            }
        } else if let source = req.source {
            let st = try statSource(source)
            let mtime = Self.modificationTime(st)
            if let recorded = record.sourceSize, recorded != Int64(st.st_size) { throw sourceChanged(source) }
            if let recorded = record.sourceMtime, recorded != mtime { throw sourceChanged(source) }
            body = UploadBodyStream(
                segments: [.file(path: source, length: Int64(st.st_size))], modificationTimes: [source: mtime])
            contentType = userType ?? MIMEType.guess(forPath: source)
        } else {
            throw TransferError(.invalidRequest, "an upload needs a source file or form parts", retryable: false)
        }
        if let path = req.response { try openResponsePart(path) }
        let length = body?.length ?? 0
        let resumable = ResumableUploadPlan(
            mode: req.resumableMode, url: record.url, method: record.method, length: length, contentType: contentType,
            filename: req.source.map { URL(fileURLWithPath: $0).lastPathComponent } ?? "upload",
            sha256Hex: req.sha256, uploadURL: record.uploadUrl, agreed: record.resumable, offset: record.durableBytes,
            appendLimit: record.appendLimit,
            completionRefused: Self.completionWasRefused(record.history))
        plan = resumable
        bytes = resumable.offset
        total = length
        if record.total != length {
            var p = JobPatch()
            p.total = .some(length)
            write(p)
        }
    }

    /// Whether the server refused the request that completed the upload, read whole, and nothing
    /// since has said more (``ResumableUploadPlan/completionRefused``): the history, which a
    /// restart keeps, read from its end past the requests that tell nothing of the upload — offset
    /// queries refused, requests a stop or a crash cut short (no status, no error) — to one that
    /// does: that refusal (its error says so), or anything else.
    static func completionWasRefused(_ history: [AttemptRecord]) -> Bool {
        for entry in history.reversed() {
            guard let error = entry.error else {
                // Cut short by a stop or a crash (after a redirect, its status is the redirect's).
                if entry.httpStatus.map({ (300..<400).contains($0) }) ?? true { continue }
                return false
            }
            if error.message.hasSuffix(ResumableUploadPlan.offsetQueryRefusedNote) { continue }
            return error.message.hasSuffix(ResumableUploadPlan.completionRefusedNote)
        }
        return false
    }

    /// Opens `--response FILE`'s part, empty, creating its directory with `--create-dirs`; refuses
    /// an existing file without `--replace`.
    private func openResponsePart(_ path: String) throws {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDir),
            isDir.boolValue || record.request.replace != true
        {
            throw TransferError(.destinationExists, "\(path) exists (use --replace)", retryable: false)
        }
        try Destination.ensureDirectory(
            Destination.directory(of: path), create: record.request.createDirs == true,
            mode: engine.config.directoryMode)
        let part = try PartFile(loop: engine.loop, path: Destination.partPath(path), mode: engine.config.fileMode)
        responsePart = part
        let rc = part.truncate(to: 0)
        if rc != 0 { throw FileErrors.error(rc, "cannot truncate \(part.path)") }
    }

    override func extraHeaders() -> [String] {
        // An empty Expect: no 100-continue round trip before the body, unless the user asks for
        // one (`-H 'Expect: 100-continue'`, as curl sends it) on a request with a body (an offset
        // query or a creation without one gets none).
        let hasBody = request.map { ($0.bodyLength ?? 0) > 0 } ?? true
        let userExpect = hasBody && HeaderField.last(named: "expect", in: record.request.headers) != nil
        return (userExpect ? [] : ["Expect:"]) + (request?.headers ?? ["Content-Type: \(contentType)"])
    }

    // MARK: - Requests

    override func start() throws {
        try prepare()
        guard let want = record.request.sha256, let source = record.request.source, plan?.uploadURL == nil else {
            try startFirstRequest()
            return
        }
        // SPEC: --sha256 is checked against the source before the first byte, on the pool.
        let hasher = RangeHasher(loop: engine.loop, path: source)
        precheck = hasher
        hasher.finish(at: total ?? 0) { [weak self] digest in
            guard let self, self.phase == .preparing else { return }
            self.precheck = nil
            guard let digest else {
                self.complete(failure: TransferError(.io, "cannot read \(source) to check its sha256", retryable: true))
                return
            }
            guard digest == want.lowercased() else {
                self.complete(
                    failure: TransferError(
                        .checksum, "sha256 of \(source) is \(digest), expected \(want)", retryable: false))
                return
            }
            self.verifiedDigest = digest
            do { try self.startFirstRequest() } catch {
                self.complete(failure: TransferError.from(error, retryable: true))
            }
        }
    }

    private func startFirstRequest() throws {
        guard var p = plan else { throw TransferError(.io, "the upload was not prepared", retryable: false) }
        let first = p.first()
        plan = p
        try send(first)
    }

    /// Sends one request of the plan; the source is checked first when the request carries bytes.
    private func send(_ r: ResumableUploadPlan.Request) throws {
        request = r
        if (r.bodyLength ?? 0) > 0 { try checkSourceUnchanged() }
        try startRequest(url: r.url)
    }

    /// SPEC: the source file is checked (size, mtime) before every append, and before and after
    /// its digest is read back; a form's file parts, each against its own stamp, once the last
    /// byte was read.
    /// - Parameter goneIsUnchanged: a file no longer at its path passes (after the payload was
    ///   read whole: the body stream checked each file's size and mtime on its open descriptor
    ///   when its last byte was read, so a source deleted or moved away meanwhile was sent as it
    ///   was queued; a file put in its place is a change).
    private func checkSourceUnchanged(goneIsUnchanged: Bool = false) throws {
        func look(at path: String) throws -> stat? {
            if goneIsUnchanged, access(path, F_OK) != 0, errno == ENOENT || errno == ENOTDIR { return nil }
            return try statSource(path)
        }
        guard let source = record.request.source else {
            for stamp in record.sources ?? [] {
                guard let st = try look(at: stamp.path) else { continue }
                if stamp.size != Int64(st.st_size) || stamp.mtime != Self.modificationTime(st) {
                    throw sourceChanged(stamp.path)
                }
            }
            return
        }
        guard let st = try look(at: source) else { return }
        if let recorded = record.sourceSize, recorded != Int64(st.st_size) { throw sourceChanged(source) }
        if let recorded = record.sourceMtime, recorded != Self.modificationTime(st) { throw sourceChanged(source) }
    }

    /// The current response's headers by name (lowercase), the last of a repeated one.
    private func responseFields() -> [String: String] {
        var out: [String: String] = [:]
        for (name, value) in headers { out[name] = value }
        return out
    }

    override func interimResponseComplete() {
        guard var p = plan, let s = currentStatus else { return }
        if p.interim(ResumableUploadPlan.Response(status: s, headers: responseFields(), url: currentURL)) {
            plan = p
            // Written now: committed at the end of this loop pass, before any checkpoint.
            persistPlan()
            Log.info("resumable upload (ietf) at \(URLRedaction.redact(p.uploadURL ?? ""))", job: jobId)
        }
    }

    override func followUp() -> Bool {
        guard var p = plan, let s = lastStatus else { return false }
        // A final answer before the body's end: the plan asks the server's offset and sends the
        // rest (README).
        let end = request.flatMap { r in r.bodyLength.map { r.bodyOffset + $0 } }
        let sentWhole = end.map { bytes >= $0 } ?? true
        if !sentWhole, let end, (200..<300).contains(s) {
            Log.info("the server answered \(s) after \(bytes) of \(end) bytes were sent", job: jobId)
        }
        let verdict = p.received(
            ResumableUploadPlan.Response(
                status: s, headers: responseFields(), url: currentURL, bodySentWhole: sentWhole))
        plan = p
        persistPlan()
        if case .send(let next) = verdict, next.method == "HEAD", request?.method == "PATCH", (200..<300).contains(s) {
            unconfirmedAppendAnswer = answer
        } else if request?.method != "HEAD" {
            unconfirmedAppendAnswer = nil
        }
        switch verdict {
        case .completed:
            if p.isResumable, p.uploadURL != nil { bytes = p.offset }
            return false
        case .failed(let error):
            unconfirmedAppendAnswer = nil  // the failing answer is the job's
            storeResponse()
            complete(failure: error)
            return true
        case .send(let next):
            sendNext(next, offset: p.offset)
            return true
        case .sendAfter(let next, let seconds):
            // SPEC: a 409 spends no retry; a server that keeps answering it is asked again, more
            // and more slowly, in the same attempt (the stall window restarts around the wait).
            Log.info("HTTP \(s) again: asking the server's offset in \(seconds) s", job: jobId)
            bytes = p.offset  // what the server acknowledged, not the refused append's bytes
            restartStallWindow(now: engine.loop.nowMillis)
            let timer = conflictTimer ?? LoopTimer(loop: engine.loop)
            conflictTimer = timer
            timer.start(after: UInt64(seconds * 1000)) { [weak self] in
                guard let self, self.phase == .transferring else { return }
                self.restartStallWindow(now: self.engine.loop.nowMillis)
                self.sendNext(next, offset: p.offset)
            }
            return true
        }
    }

    /// Sends the plan's next request of this attempt, in a new history entry.
    private func sendNext(_ next: ResumableUploadPlan.Request, offset: Int64) {
        lastByteAnswered = false
        bytes = offset
        beginNextHistoryEntry()
        do { try send(next) } catch {
            complete(failure: TransferError.from(error, retryable: true))
        }
    }

    override func halt() {
        conflictTimer?.close()
        conflictTimer = nil
        super.halt()
    }

    /// Writes what the plan learnt (upload URL, protocol, acknowledged offset, append limit).
    private func persistPlan() {
        guard let p = plan, p.isResumable else { return }
        var patch = JobPatch()
        if record.uploadUrl != p.uploadURL { patch.uploadUrl = .some(p.uploadURL) }
        if record.resumable != p.agreed {
            patch.resumable = .some(p.agreed)
        }
        if record.durableBytes != p.offset { patch.durableBytes = p.offset }
        if record.appendLimit != p.appendLimit { patch.appendLimit = .some(p.appendLimit) }
        write(patch)
    }

    // MARK: - Sending

    override func configure(_ options: inout CurlRequestOptions, _ easy: CurlEasy) {
        // Every hop sends the payload from byte 0.
        restartPayload()
        keepBody = false
        bodyToFile = false
        responseBytes = 0
        // The `HEAD` that confirms an append answered without an offset keeps that append's body,
        // kept or in the response file (its own answer has none): it may become the job's.
        if !(request?.method == "HEAD" && unconfirmedAppendAnswer != nil) {
            keptBody = Data()
            _ = responsePart?.truncate(to: 0)
        }
        // Under a limit (`--limit-rate`, or the daemon's upload limit in force now), reads of an
        // eighth of a second's worth keep the pace smooth, and the job's `rate` with it: a
        // second's worth a read sent it in bursts, and the rate shown swung by half either way.
        let limits = [limiter?.rate, engine.bandwidth.upload.rate.map(Double.init)].compactMap { $0 }
        let paced = limits.min().map { Int(min(Double(Self.uploadBufferSize), max(16 * 1024, $0 / 8))) }
        if let r = request, r.method == "HEAD" {
            options.body = .head
        } else {
            options.body = .upload(
                method: request?.method ?? record.method, length: request?.bodyLength ?? body?.length ?? 0,
                bufferSize: paced ?? Self.uploadBufferSize)
        }
        easy.onRead = { [unowned self] buffer in self.supply(buffer) }
        // libcurl rewinds a body to send it again by itself, unseen (a reused connection that
        // closed without an answer): refused, so that every request sent is one the daemon
        // counts (`--retries 0` sends it once) and records in the history.
        easy.onRewind = { false }
        easy.onBody = { [unowned self] data in self.receive(data) }
    }

    /// Back to the request's first byte: the stream, the digest and the progress. A request from
    /// byte 0 hashes afresh; an append keeps the attempt's hasher, which reads the file itself.
    private func restartPayload() {
        let start = request?.bodyOffset ?? 0
        guard request?.method != "HEAD" else {
            bytes = plan?.offset ?? bytes
            return
        }
        body?.rewind(to: start)
        if start == 0 {
            hasher = Sha256()
            fileHasher?.close()
            fileHasher =
                verifiedDigest == nil
                ? record.request.source.map { RangeHasher(loop: engine.loop, path: $0, openingNow: true) } : nil
        }
        bytes = start
    }

    /// The end of the current request's bytes in the payload.
    private var requestEnd: Int64 {
        guard let r = request, let n = r.bodyLength else { return body?.length ?? 0 }
        return r.bodyOffset + n
    }

    /// The read callback: fills libcurl's buffer from the payload and hashes what it gave.
    private func supply(_ buffer: UnsafeMutableRawBufferPointer) -> CurlEasy.ReadVerdict {
        guard let body, let base = buffer.baseAddress else { return .bytes(0) }
        let want = Int(min(Int64(buffer.count), max(0, requestEnd - body.position)))
        guard want > 0 else { return .bytes(0) }
        guard pace(want) else { return .pause }
        do {
            let n = try body.read(into: base, count: want)
            if n > 0 {
                if let fileHasher {
                    fileHasher.advance(to: body.position)
                } else {
                    hasher.update(base, n)
                }
                progressed(to: body.position)
            }
            return .bytes(n)
        } catch {
            abortError = TransferError.from(error, retryable: false)
            return .abort
        }
    }

    // MARK: - The response

    override func responseHeadersComplete() {
        let accepted = (200..<300).contains(lastStatus ?? 0)
        // A 2xx to the request that carried the last byte: the upload is done on the server.
        lastByteAnswered = accepted && total.map { bytes >= $0 } == true
        keepBody = true
        bodyToFile = responsePart != nil && accepted
    }

    /// The write callback: the final response's body, to the response file or kept (64 KiB).
    private func receive(_ data: UnsafeRawBufferPointer) -> CurlEasy.BodyVerdict {
        // The answer flowing is activity too (stall detection), though `bytes` counts what was sent.
        lastProgressAt = engine.loop.nowMillis
        guard keepBody, let p = data.baseAddress else { return .accept }
        let n = data.count
        if bodyToFile, let part = responsePart {
            let rc = part.append(p, n, at: responseBytes)
            if rc != 0 {
                abortError = FileErrors.error(rc, "cannot write \(part.path)")
                return .abort
            }
        } else if keptBody.count < Self.keptResponseBytes {
            let take = min(n, Self.keptResponseBytes - keptBody.count)
            keptBody.append(p.assumingMemoryBound(to: UInt8.self), count: take)
        }
        responseBytes += Int64(n)
        return .accept
    }

    /// Keeps the final response's status, headers and (unless saved to a file) body with the job:
    /// the answer of the append before it when this is the `HEAD` that confirmed that append
    /// (``unconfirmedAppendAnswer``).
    private func storeResponse() {
        guard keepBody, let info = unconfirmedAppendAnswer ?? answer else { return }
        var p = JobPatch()
        p.response = .some(info)
        write(p)
    }

    /// The current response as the job keeps it, nil before a final one (a `HEAD`'s has no body).
    private var answer: ResponseInfo? {
        guard let s = lastStatus else { return nil }
        var fields: [String: String] = [:]
        for (name, value) in headers {
            fields[name] = fields[name].map { "\($0), \(value)" } ?? value
        }
        let body = bodyToFile || request?.method == "HEAD" ? "" : String(decoding: keptBody, as: UTF8.self)
        return ResponseInfo(status: s, headers: fields, body: body)
    }

    /// The 2xx answer of an append that did not say the server's offset (a tus server without
    /// `Upload-Offset`), while the `HEAD` that asks it is under way: when that finds the upload
    /// complete, this answer is the job's response (SPEC: the last `PATCH`'s), not the `HEAD`'s
    /// (found by an outside audit). Dropped when the `HEAD` fails (its own answer is the job's)
    /// and by the next append's answer.
    private var unconfirmedAppendAnswer: ResponseInfo?

    // MARK: - Finishing

    override func complete(report: @escaping (AttemptOutcome) -> Void) {
        storeResponse()
        let s = lastStatus ?? 0
        guard (200..<300).contains(s) else {
            complete(failure: RetryPolicy.error(forHTTPStatus: s))
            return
        }
        if let t = total, bytes != t {
            // A final 2xx before the whole body was read: the server acted on the request, and
            // would again. Sent again, a POST went out --retries + 1 times (curl calls it a
            // success; the job's bytes say otherwise, so it fails, once). A resumable upload asks
            // the server's offset and sends the rest instead.
            let resumable = plan?.uploadURL != nil
            let message =
                "the server answered \(s) after \(bytes) of \(t) bytes were sent"
                + (resumable ? "" : " (not sent again: it may have acted on the request)")
            complete(failure: TransferError(.network, message, retryable: resumable))
            return
        }
        body?.close()
        if let verifiedDigest {
            finish(digest: verifiedDigest, report: report)
            return
        }
        if fileHasher == nil, plan?.uploadURL != nil, let source = record.request.source {
            // A resumed upload: the digest of the whole file, read back on the pool.
            fileHasher = RangeHasher(loop: engine.loop, path: source)
        }
        guard let fileHasher else {
            // Hashed as it was read: the files at their paths are still the ones sent (or gone,
            // which changed nothing sent), or it failed.
            do { try checkSourceUnchanged(goneIsUnchanged: true) } catch {
                complete(failure: TransferError.from(error, retryable: false))
                return
            }
            finish(digest: hasher.finalizeHex(), report: report)
            return
        }
        // The digest is read back from the file (what the reads for sending did not feed it): it
        // is the payload's only if the file is still the one sent. Checked before the read (a
        // change after the last byte was read for sending) and after it (a change while it was
        // read back). A file gone from its path changed nothing sent; if bytes must be read back
        // from it, that read fails.
        do { try checkSourceUnchanged(goneIsUnchanged: true) } catch {
            complete(failure: TransferError.from(error, retryable: false))
            return
        }
        fileHasher.finish(at: bytes) { digest in
            do { try self.checkSourceUnchanged(goneIsUnchanged: true) } catch {
                self.discard()
                report(
                    .failed(
                        TransferError.from(error, retryable: false), retryAfter: nil))
                return
            }
            guard let digest else {
                self.discard()
                report(
                    .failed(
                        TransferError(.io, "cannot read the source back to hash it", retryable: true), retryAfter: nil))
                return
            }
            self.finish(digest: digest, report: report)
        }
    }

    /// Saves the response file, if any, and reports completion with the payload's digest.
    private func finish(digest: String, report: @escaping (AttemptOutcome) -> Void) {
        guard let part = responsePart, let path = record.request.response else {
            report(.completed(sha256: digest))
            return
        }
        responsePart = nil
        part.sync { ok in
            part.close()
            guard ok else {
                unlink(part.path)
                report(.failed(TransferError(.io, "cannot sync \(part.path)", retryable: false), retryAfter: nil))
                return
            }
            Destination(path: path).moveIntoPlace(
                from: part.path, replace: self.record.request.replace == true, syncer: self.engine.directorySyncer
            ) { error in
                guard let error else {
                    report(.completed(sha256: digest))
                    return
                }
                guard error.code == .destinationExists else {
                    unlink(part.path)
                    report(.failed(error, retryAfter: nil))
                    return
                }
                // A file that appeared there meanwhile is not replaced; the server's answer, the
                // only copy of it (the upload was accepted), stays in the part for the user.
                report(
                    .failed(
                        TransferError(
                            .destinationExists,
                            "\(path) exists (use --replace); the server's answer is kept in \(part.path)",
                            retryable: false),
                        retryAfter: nil))
            }
        }
    }

    /// Closes the payload and throws away a partial response file.
    private func discard() {
        body?.close()
        fileHasher?.close()
        precheck?.close()
        precheck = nil
        if let part = responsePart {
            unlink(part.path)
            engine.partDeleted(part.path)
            part.close()
        }
        responsePart = nil
    }

    override func failed(_ error: TransferError, then: @escaping () -> Void) {
        discard()
        then()
    }

    override func stopped(_ reason: StopReason, then: @escaping () -> Void) {
        discard()
        then()
    }
}
