import Foundation

/// One attempt of a download: bytes go to the destination's part (`<destination>.aftpart`),
/// resumed with `Range` and `If-Range`, hashed as they arrive, synced, verified and moved into
/// place (SPEC "Downloads"). The part is created with the first body byte, so a failure before
/// any (a 404, a refused redirect) leaves nothing behind. Loop-thread only.
final class DownloadTask: TransferTask {
    private var part: PartFile?
    /// The part's path once the destination is known.
    private var partPath: String?
    /// The digest of the part, computed off the loop (nil until the part is open).
    private var hasher: RangeHasher?
    /// Bytes already in the part when this attempt asked for more.
    private var offset: Int64 = 0
    /// Whether body bytes of the current response are written (false for errors and redirects).
    private var keepBody = false
    /// A 416 told us the part is already whole.
    private var wholeAlready = false
    /// The offset of the last checkpoint asked for.
    private(set) var checkpointRequestedAt: Int64 = -1

    override func prepare() throws {
        if let dest = record.destination { try openExistingPart(for: Destination(path: dest)) }
        bytes = offset
        total = record.total
    }

    /// Opens the part if one exists, then hashes the bytes it already holds on libuv's pool (a
    /// large part would block the loop) before the first request.
    override func start() throws {
        try prepare()
        guard offset > 0, let hasher else {
            try startHop()
            return
        }
        hasher.whenHashed(upTo: offset) { ok in
            guard self.phase == .preparing else { return }
            if !ok { self.resetToZero() }  // bytes that cannot be read back cannot be verified
            do { try self.startHop() } catch {
                self.complete(failure: error as? TransferError ?? TransferError(.io, "\(error)", retryable: true))
            }
        }
    }

    /// Checks (or creates) the directory and opens an existing part; `offset` is its size.
    private func openExistingPart(for dest: Destination) throws {
        try Destination.ensureDirectory(
            dest.directory, create: record.request.createDirs == true, mode: engine.config.directoryMode)
        partPath = dest.partPath
        offset = 0
        part = nil
        hasher?.close()
        hasher = nil
        var st = stat()
        guard stat(dest.partPath, &st) == 0 else { return }
        try openPart(dest.partPath)
    }

    /// Opens (creating) the part and a hasher reading it back.
    private func openPart(_ path: String) throws {
        let p = try PartFile(loop: engine.loop, path: path, mode: engine.config.fileMode)
        part = p
        offset = p.size()
        hasher?.close()
        hasher = RangeHasher(loop: engine.loop, path: path)
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

    override func configure(_ options: inout CurlRequestOptions, _ easy: CurlEasy) {
        if offset > 0 { options.rangeFrom = offset }
        easy.onBody = { [unowned self] data in self.receive(data) }
    }

    override func responseHeadersComplete() {
        keepBody = false
        guard let s = lastStatus else { return }
        if s == 416 && offset > 0 {
            let remote = contentRange()?.total ?? record.total
            if remote == offset {
                wholeAlready = true
                total = remote
            } else {
                // The part is longer than the remote file: its content changed.
                resetToZero()
                abortError = TransferError(
                    .httpStatus, "HTTP 416: the remote file is shorter than the part; starting over", retryable: true)
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
                abortError = TransferError(
                    .network, "the server sent a range that does not match the part; starting over", retryable: true)
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
        if let err = Self.lacksSpace(for: total, from: offset, partPath: partPath) {
            abortError = err
            return
        }
        var p = JobPatch()
        if offset == 0 { p.durableBytes = 0 }
        p.etag = .some(header("etag"))
        p.lastModified = .some(header("last-modified"))
        p.total = .some(total)
        write(p)
        keepBody = true
    }

    // MARK: - Disk full (SPEC "Disk full and other faults")

    /// A `disk_full` error when a known size will not fit: the job waits for space before it
    /// writes a byte, instead of filling the disk and failing half way.
    static func lacksSpace(for total: Int64?, from offset: Int64, partPath: String?) -> TransferError? {
        guard let total, let partPath, total > offset else { return nil }
        let needed = total - offset
        guard let free = DiskSpace.available(at: partPath), free < needed else { return nil }
        return TransferError(
            .diskFull,
            "\(DiskSpace.describe(needed)) to write, \(DiskSpace.describe(free)) free for \(partPath)", retryable: true)
    }

    /// The error of a failed sync: `disk_full` (the job waits for space) when the file system
    /// ran out only then, else `io`.
    static func syncFailure(_ part: PartFile) -> TransferError {
        let e = part.lastSyncErrno
        if e == ENOSPC || e == EDQUOT { return FileErrors.error(e, "cannot sync \(part.path)") }
        return TransferError(.io, "cannot sync \(part.path)", retryable: false)
    }

    /// After a write failed for want of space: the part is cut back to the bytes counted (a
    /// short write may have left a few more), so it stays byte-exact up to its checkpoint.
    private func trimAfterDiskFull(_ error: TransferError) {
        guard error.code == .diskFull, let part else { return }
        _ = part.truncate(to: bytes)
    }

    /// Names the destination from Content-Disposition or the URL (directory mode).
    private func nameDestination() -> Bool {
        let dir = record.request.directory ?? FileManager.default.currentDirectoryPath
        let name = SuggestedFilename.suggest(contentDisposition: header("content-disposition"), url: record.url)
        let dest = Destination(path: (dir as NSString).appendingPathComponent(name))
        if let err = dest.clash(
            replace: record.request.replace == true, heldBy: engine.holder(of: dest.path, except: jobId))
        {
            abortError = err
            return false
        }
        do {
            var p = JobPatch()
            p.destination = .some(dest.path)
            write(p)
            try openExistingPart(for: dest)
            if offset > 0 {
                // A stale part of another download: never splice.
                _ = part?.truncate(to: 0)
                offset = 0
                hasher?.close()
                hasher = part.map { RangeHasher(loop: engine.loop, path: $0.path) }
            }
            bytes = 0
            Log.info("destination \(dest.path)", job: jobId)
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
        write(engine.checkpointer.discard(jobId))
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

    /// The body callback: appends bytes to the part (created with the first byte) and the digest.
    private func receive(_ data: UnsafeRawBufferPointer) -> CurlEasy.BodyVerdict {
        guard keepBody else { return .accept }
        guard pace(data.count) else { return .pause }
        if part == nil {
            guard let path = partPath else {
                abortError = TransferError(.io, "no destination to write to", retryable: false)
                return .abort
            }
            do { try openPart(path) } catch {
                abortError = error as? TransferError ?? TransferError(.io, "\(error)", retryable: false)
                return .abort
            }
        }
        guard let part, let base = data.baseAddress else { return .accept }
        let rc = part.append(base, data.count, at: bytes)
        if rc != 0 {
            abortError = FileErrors.error(rc, "cannot write \(part.path)")
            return .abort
        }
        progressed(to: bytes + Int64(data.count))
        hasher?.advance(to: bytes)
        return .accept
    }

    /// Makes the bytes so far durable, then records the offset (bytes before bookkeeping).
    func checkpoint(then: (() -> Void)? = nil) {
        guard let part else {
            then?()
            return
        }
        let at = bytes
        checkpointRequestedAt = at
        let gen = engine.checkpointer.generation(jobId)
        part.sync { ok in
            if ok { self.engine.checkpointer.recorded(self.jobId, generation: gen, offset: at) }
            then?()
        }
    }

    override func complete(report: @escaping (AttemptOutcome) -> Void) {
        let s = lastStatus ?? 0
        if !wholeAlready && !(200..<300).contains(s) {
            complete(failure: RetryPolicy.error(forHTTPStatus: s))
            return
        }
        if let t = total, bytes != t {
            complete(failure: TransferError(.network, "the transfer ended at \(bytes) of \(t) bytes", retryable: true))
            return
        }
        guard let dest = record.destination, let path = partPath else {
            complete(failure: TransferError(.io, "the response had no body to save", retryable: false))
            return
        }
        if part == nil {
            // An empty body: the (empty) file is created now.
            do { try openPart(path) } catch {
                complete(failure: error as? TransferError ?? TransferError(.io, "\(error)", retryable: false))
                return
            }
        }
        guard let part else { return }
        let size = bytes
        let gen = engine.checkpointer.generation(jobId)
        part.sync { ok in
            guard ok else {
                part.close()
                report(.failed(Self.syncFailure(part), retryAfter: nil))
                return
            }
            self.engine.checkpointer.recorded(self.jobId, generation: gen, offset: size)
            part.close()
            guard let hasher = self.hasher else {
                report(.failed(TransferError(.io, "no digest for \(part.path)", retryable: false), retryAfter: nil))
                return
            }
            hasher.finish(at: size) { digest in
                guard let digest else {
                    report(
                        .failed(
                            TransferError(.io, "cannot read back \(part.path) to hash it", retryable: true),
                            retryAfter: nil))
                    return
                }
                self.verified(part: part, dest: Destination(path: dest), size: size, digest: digest, report: report)
            }
        }
    }

    /// Checks `--sha256`, records that the job is finalizing, and once that is committed moves
    /// the part into place (SPEC: the row before the rename, so recovery recognizes a rename a
    /// crash interrupted).
    private func verified(
        part: PartFile, dest: Destination, size: Int64, digest: String, report: @escaping (AttemptOutcome) -> Void
    ) {
        guard phase != .ended else { return }
        if let want = record.request.sha256, want.lowercased() != digest {
            unlink(part.path)
            write(engine.checkpointer.discard(jobId))
            report(
                .failed(
                    TransferError(.checksum, "sha256 is \(digest), expected \(want)", retryable: false), retryAfter: nil
                ))
            return
        }
        var p = JobPatch()
        p.finalizing = true
        p.durableBytes = size
        p.sha256 = .some(digest)
        write(p)
        engine.afterCommit {
            guard self.phase != .ended else { return }
            dest.moveIntoPlace(
                from: part.path, replace: self.record.request.replace == true, syncer: self.engine.directorySyncer
            ) { error in
                guard let error else {
                    report(.completed(sha256: digest))
                    return
                }
                var undo = JobPatch()
                undo.finalizing = false
                self.write(undo)
                report(.failed(error, retryAfter: nil))
            }
        }
    }

    override func failed(_ error: TransferError, then: @escaping () -> Void) {
        trimAfterDiskFull(error)
        hasher?.close()
        checkpoint {
            self.part?.close()
            self.removeEmptyPart()
            then()
        }
    }

    /// Leaves nothing behind when there is nothing to resume: an empty part is deleted.
    private func removeEmptyPart() {
        guard let path = partPath else { return }
        var st = stat()
        if stat(path, &st) == 0 && st.st_size == 0 { unlink(path) }
    }

    override func stopped(_ reason: StopReason, then: @escaping () -> Void) {
        if reason == .cancel {
            hasher?.close()
            if let partPath { unlink(partPath) }
            part?.close()
            write(engine.checkpointer.discard(jobId))
            then()
            return
        }
        failed(TransferError(.cancelled, "stopped"), then: then)
    }

    /// Synchronous checkpoint for shutdown: fdatasync on the loop, then the row.
    override func checkpointNow() {
        guard let part else { return }
        if fdatasync(part.fd) == 0 {
            engine.checkpointer.recorded(jobId, generation: engine.checkpointer.generation(jobId), offset: bytes)
        }
    }
}
