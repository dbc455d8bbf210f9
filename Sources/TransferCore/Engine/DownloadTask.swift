import CCurl
import Foundation

/// One attempt of a download: bytes go to `<destination>.aftpart`, resumed with `Range` and
/// `If-Range`, hashed as they arrive, synced, verified and renamed into place (SPEC "Downloads").
/// Loop-thread only.
final class DownloadTask: TransferTask {
    private var part: PartFile?
    /// The digest of the part, computed off the loop (nil until the part is open).
    private var hasher: RangeHasher?
    /// Bytes already in the part when this attempt asked for more.
    private var offset: Int64 = 0
    /// Whether body bytes of the current response are written (false for errors and redirects).
    private var keepBody = false
    /// A 416 told us the part is already whole.
    private var wholeAlready = false

    /// The suffix of part files.
    static let partSuffix = ".aftpart"

    /// The part file of a destination: `<destination>.aftpart`, or, when that name would pass
    /// the 255-byte limit of a file name, a shortened name with a digest of the full one (still a
    /// pure function of the destination, so recovery finds it).
    static func partPath(_ destination: String) -> String {
        let name = (destination as NSString).lastPathComponent
        if name.utf8.count + partSuffix.utf8.count <= 255 { return destination + partSuffix }
        let digest = Sha256()
        let bytes = Array(name.utf8)
        bytes.withUnsafeBytes { if let base = $0.baseAddress { digest.update(base, bytes.count) } }
        var prefix = ""
        for ch in name.unicodeScalars {
            if prefix.utf8.count + String(ch).utf8.count > 200 { break }
            prefix.unicodeScalars.append(ch)
        }
        let short = prefix + "." + digest.finalizeHex().prefix(16) + partSuffix
        return ((destination as NSString).deletingLastPathComponent as NSString).appendingPathComponent(short)
    }

    override func prepare() throws {
        if let dest = record.destination { try openPart(for: dest) }
        bytes = offset
        total = record.total
    }

    /// Opens the part, then hashes the bytes it already holds on libuv's pool (a large part would
    /// block the loop) before the first request.
    override func start() throws {
        try prepare()
        guard offset > 0, let hasher else {
            try startHop()
            return
        }
        isPreparing = true
        hasher.whenHashed(upTo: offset) { ok in
            self.isPreparing = false
            guard self.stopReason == nil else { return }
            if !ok { self.resetToZero() }  // bytes that cannot be read back cannot be verified
            do { try self.startHop() } catch {
                self.complete(failure: error as? TransferError ?? TransferError(.io, "\(error)", retryable: true))
            }
        }
    }

    /// Creates parent directories if asked and opens the part; `offset` is its size.
    private func openPart(for dest: String) throws {
        let dir = (dest as NSString).deletingLastPathComponent
        try engine.ensureDirectory(dir, create: record.request.createDirs == true)
        let p = try PartFile(loop: engine.loop, path: Self.partPath(dest), mode: engine.config.fileMode)
        part = p
        offset = p.size()
        hasher?.close()
        hasher = RangeHasher(loop: engine.loop, path: p.path)
    }

    override var overriddenHeaders: [String] { ["accept-encoding", "range", "if-range"] }

    override func extraHeaders() -> [String] {
        var h = ["Accept-Encoding: identity"]
        if offset > 0 {
            if let etag = record.etag, !etag.hasPrefix("W/") {
                h.append("If-Range: \(etag)")
            } else if let lm = record.lastModified {
                h.append("If-Range: \(lm)")
            }
        }
        return h
    }

    override func configureBody(_ easy: CurlEasy) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        easy.set(CURLOPT_WRITEDATA, pointer: me)
        easy.set(CURLOPT_WRITEFUNCTION, callback: { ptr, size, n, ud in
            guard let ptr, let ud else { return 0 }
            let t = Unmanaged<DownloadTask>.fromOpaque(ud).takeUnretainedValue()
            return t.receive(UnsafeRawPointer(ptr), size * n)
        })
        if offset > 0 { easy.set(CURLOPT_RANGE, "\(offset)-") }
    }

    override func responseHeadersComplete() {
        keepBody = false
        guard let s = status else { return }
        if s == 416 && offset > 0 {
            let remote = contentRange()?.total ?? record.total
            if remote == offset {
                wholeAlready = true
                total = remote
            } else {
                // The part is longer than the remote file: its content changed.
                resetToZero()
                abortError = TransferError(.httpStatus, "HTTP 416: the remote file is shorter than the part; starting over", retryable: true)
            }
            return
        }
        guard (200..<300).contains(s) else { return }
        if record.destination == nil {
            if !nameDestination() { return }
        }
        if s == 206 {
            guard let cr = contentRange(), cr.start == offset else {
                resetToZero()
                abortError = TransferError(.network, "the server sent a range that does not match the part; starting over", retryable: true)
                return
            }
            total = cr.total
        } else {
            // 200 (or another 2xx) to a ranged request: range ignored or content changed.
            if offset > 0 {
                Log.info("server answered \(s) to a range request: restarting from byte 0", job: jobId)
                resetToZero()
            }
            total = header("content-length").flatMap { Int64($0) }
        }
        let etag = header("etag")
        let lm = header("last-modified")
        let newTotal = total
        let reset = offset == 0
        let r = engine.updateRecord(jobId) { r in
            if reset { r.durableBytes = 0 }
            r.etag = etag
            r.lastModified = lm
            r.total = newTotal
        }
        if let r { refresh(r) }
        keepBody = true
    }

    /// Names the destination from Content-Disposition or the URL (directory mode) and opens the part.
    private func nameDestination() -> Bool {
        let dir = record.request.directory ?? FileManager.default.currentDirectoryPath
        let name = SuggestedFilename.suggest(contentDisposition: header("content-disposition"), url: record.url)
        let dest = (dir as NSString).appendingPathComponent(name)
        if let err = engine.destinationConflict(dest, job: jobId, replace: record.request.replace == true) {
            abortError = err
            return false
        }
        do {
            if let r = engine.updateRecord(jobId, { $0.destination = dest }) { refresh(r) }
            try openPart(for: dest)
            if offset > 0 {
                // A stale part of another download: never splice. (The fresh hasher from
                // openPart has read nothing yet, so it stays valid.)
                _ = part?.truncate(to: 0)
                offset = 0
            }
            bytes = 0
            Log.info("destination \(dest)", job: jobId)
            return true
        } catch let e as TransferError {
            abortError = e
        } catch {
            abortError = TransferError(.io, "\(error)", retryable: false)
        }
        return false
    }

    /// Throws away the part's bytes: the database first (durable 0), then the file.
    private func resetToZero() {
        engine.invalidateCheckpoints(jobId)
        if let r = engine.updateRecord(jobId, { r in
            r.durableBytes = 0
            r.etag = nil
            r.lastModified = nil
        }) { refresh(r) }
        _ = part?.truncate(to: 0)
        offset = 0
        bytes = 0
        hasher?.close()
        hasher = part.map { RangeHasher(loop: engine.loop, path: $0.path) }
    }

    private func contentRange() -> (start: Int64, total: Int64?)? {
        guard let v = header("content-range") else { return nil }
        // "bytes 100-199/200", "bytes */200", "bytes 100-199/*"
        let spec = v.split(separator: " ", maxSplits: 1).last.map(String.init) ?? ""
        let halves = spec.split(separator: "/", maxSplits: 1)
        guard halves.count == 2 else { return nil }
        let t = Int64(halves[1])
        if halves[0] == "*" { return (start: -1, total: t) }
        guard let s = halves[0].split(separator: "-").first.flatMap({ Int64($0) }) else { return nil }
        return (start: s, total: t)
    }

    /// The write callback: appends body bytes to the part and the digest.
    private func receive(_ p: UnsafeRawPointer, _ n: Int) -> Int {
        guard keepBody else { return n }
        guard pace(n) else { return Int(CURL_WRITEFUNC_PAUSE) }
        guard let part else {
            abortError = TransferError(.io, "no part file is open", retryable: false)
            return 0
        }
        let rc = part.append(p, n, at: bytes)
        if rc != 0 {
            abortError = FileErrors.error(rc, "cannot write \(part.path)")
            return 0
        }
        progressed(to: bytes + Int64(n))
        hasher?.advance(to: bytes)
        return n
    }

    /// The offset of the last checkpoint asked for.
    private(set) var checkpointRequestedAt: Int64 = -1

    /// Makes the bytes so far durable, then records the offset (bytes before bookkeeping).
    func checkpoint(then: (() -> Void)? = nil) {
        guard let part else {
            then?()
            return
        }
        let at = bytes
        checkpointRequestedAt = at
        let gen = engine.checkpointGeneration(jobId)
        part.sync { ok in
            if ok { self.engine.recordCheckpoint(self.jobId, generation: gen, offset: at) }
            then?()
        }
    }

    override func complete(report: @escaping (AttemptOutcome) -> Void) {
        let s = status ?? 0
        if !wholeAlready && !(200..<300).contains(s) {
            complete(failure: RetryPolicy.error(forHTTPStatus: s))
            return
        }
        if let t = total, bytes != t {
            complete(failure: TransferError(.network, "the transfer ended at \(bytes) of \(t) bytes", retryable: true))
            return
        }
        guard let part, let dest = record.destination else {
            complete(failure: TransferError(.io, "the response had no body to save", retryable: false))
            return
        }
        let size = bytes
        let gen = engine.checkpointGeneration(jobId)
        part.sync { ok in
            guard ok else {
                part.close()
                report(.failed(TransferError(.io, "cannot sync \(part.path)", retryable: false), retryAfter: nil))
                return
            }
            self.engine.recordCheckpoint(self.jobId, generation: gen, offset: size)
            part.close()
            guard let hasher = self.hasher else {
                report(.failed(TransferError(.io, "no digest for \(part.path)", retryable: false), retryAfter: nil))
                return
            }
            hasher.finish(at: size) { digest in
                guard let digest else {
                    report(.failed(TransferError(.io, "cannot read back \(part.path) to hash it", retryable: true), retryAfter: nil))
                    return
                }
                self.verified(part: part, dest: dest, size: size, digest: digest, report: report)
            }
        }
    }

    /// Checks `--sha256`, then moves the part into place.
    private func verified(
        part: PartFile, dest: String, size: Int64, digest: String, report: @escaping (AttemptOutcome) -> Void
    ) {
        if let want = record.request.sha256, want.lowercased() != digest {
            unlink(part.path)
            engine.invalidateCheckpoints(jobId)
            engine.updateRecord(jobId) { r in
                r.durableBytes = 0
                r.etag = nil
                r.lastModified = nil
            }
            report(.failed(TransferError(.checksum, "sha256 is \(digest), expected \(want)", retryable: false), retryAfter: nil))
            return
        }
        report(engine.finalize(jobId: jobId, part: part.path, destination: dest, size: size, digest: digest,
                               replace: record.request.replace == true))
    }


    override func failed(_ error: TransferError, then: @escaping () -> Void) {
        hasher?.close()
        checkpoint {
            self.part?.close()
            then()
        }
    }

    override func stopped(_ reason: StopReason, then: @escaping () -> Void) {
        if reason == .cancel {
            hasher?.close()
            if let part {
                unlink(part.path)
                part.close()
            }
            engine.invalidateCheckpoints(jobId)
            engine.updateRecord(jobId) { r in
                r.durableBytes = 0
                r.etag = nil
                r.lastModified = nil
            }
            then()
            return
        }
        failed(TransferError(.cancelled, "stopped"), then: then)
    }

    /// Synchronous checkpoint for shutdown: fdatasync on the loop, then the row.
    func checkpointNow() {
        guard let part else { return }
        if fdatasync(part.fd) == 0 {
            engine.recordCheckpoint(jobId, generation: engine.checkpointGeneration(jobId), offset: bytes)
        }
    }
}
