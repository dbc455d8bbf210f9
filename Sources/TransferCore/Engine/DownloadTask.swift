import Foundation

/// One attempt of a download: bytes go to the destination's part (`<destination>.aftpart`),
/// resumed with `Range` and `If-Range`, hashed as they arrive, synced, verified and moved into
/// place (SPEC "Downloads"). The part is created with the first body byte, so a failure before
/// any (a 404, a refused redirect) leaves nothing behind.
///
/// A fresh download whose announced length is at most ``heldBodyLimit`` is held in memory: the
/// small file is created, written, synced and closed in one work item on libuv's pool, so the
/// loop spends no system call on it. Any checkpoint (the periodic one, pause, stop, a failed
/// attempt) writes the held bytes to the part first and goes on as usual, so a slow small file is
/// held at most about a second. Any other body gets its part with its first byte.
///
/// With `--connections N` > 1 the download may be segmented (SPEC "Segmented downloads", the
/// `Segments` section below): the first request (this task's own hop) is `Range: bytes=0-`; once
/// its `206` shows a size of at least 2 MiB and a strong validator, a ``SegmentPlan`` splits the
/// file, the first request keeps the first segment and ``SegmentConnection``s fetch the others
/// into the same part at their offsets. Loop-thread only.
final class DownloadTask: TransferTask {
    /// The largest announced length of a body held in memory (see the type's documentation).
    static let heldBodyLimit = 256 << 10

    // State that ``DownloadTask+Segments.swift`` reads and changes too is internal, not private:
    // nothing outside the task touches it.
    /// The part file, once open.
    var part: PartFile?
    /// The body so far, held while no part is open (nil when nothing is held).
    private var held: [UInt8]?
    /// The attempt was cancelled (or the job removed): its part is to be gone.
    private var discarded = false
    /// The part's path once the destination is known.
    var partPath: String?
    /// The digest of the part, computed off the loop (nil until the part is open).
    var hasher: RangeHasher?
    /// Bytes already in the part when this attempt asked for more.
    var offset: Int64 = 0
    /// Whether body bytes of the current response are written (false for errors and redirects).
    var keepBody = false
    /// A 416 told us the part is already whole.
    private var wholeAlready = false
    /// The destination named at this response's headers was not looked for on disk there: the
    /// body is announced small enough to be held, so the look is made off the loop, just before
    /// the part is created (``SmallFileWriter``), or on the loop if the body goes to a part after all.
    private var destinationUnchecked = false
    /// The offset of the last checkpoint asked for.
    private(set) var checkpointRequestedAt: Int64 = -1

    // Segments (see the type's documentation).
    /// Connections wanted: the job's `--connections`, else the daemon's default.
    var wantConnections = 1
    /// The ranges of a segmented download; nil for one connection.
    var plan: SegmentPlan?
    /// The segment this task's own request fetches, while it does.
    var primarySegment: Int64?
    /// This task's own request is a segment connection whose response was accepted.
    var primaryAccepted = false
    /// This task's own request got past its segment's end and was stopped for that.
    var primaryReachedEnd = false
    /// The further connections.
    var connections: [SegmentConnection] = []
    /// Which connection ``resumePaced()`` resumes first next time (they take turns).
    private var resumeTurn = 0
    /// Runs ``pump()`` on the loop, never inside a curl callback.
    var pumpTimer: LoopTimer?
    /// Failed further connections, and the last one's error.
    var connectionFailures = 0
    /// Retries spent by failed ranges (``rangeFailed(_:retryAfter:)``) whose ranges were not asked
    /// for again yet: if the attempt ends first, the next attempt is what they paid for.
    var rangeRetriesUnused = 0
    /// The last failed further connection's error.
    var lastConnectionError: TransferError?
    /// The `Retry-After` (seconds) of the last failed range request, if it had one.
    var lastConnectionRetryAfter: Double?
    /// The HTTP status of the last range request that failed with one (a `404` to a later range),
    /// nil when it failed otherwise: the job's `httpStatus` if it ends the attempt.
    var lastConnectionStatus: Int?
    /// After a range request failed: no range request starts before this time (the loop's
    /// milliseconds), see ``rangeFailed(_:retryAfter:)``.
    var rangesHeldUntil: UInt64?
    /// Runs ``pump()`` when ``rangesHeldUntil`` passes (apart from ``pumpTimer``, which must
    /// stay free to run it at once).
    var holdTimer: LoopTimer?
    /// A `200` to a range or a changed validator: stop all, start over from byte 0 on one.
    var fallbackRequested = false
    /// After a fallback: one connection for the rest of the attempt.
    var singleOnly = false
    /// The first response came over HTTP/2: the ranges are streams of one connection.
    var multiplexed = false

    override func prepare() throws {
        wantConnections = record.request.connections ?? engine.config.connections
        if let dest = record.destination { try openExistingPart(for: Destination(path: dest)) }
        if let text = record.segments {
            // The part must hold every durable byte: a crash between cutting it (a fallback to
            // one connection) and the commit that forgot the ranges leaves a shorter file.
            if let part, let t = record.total, ifRangeValue != nil,
                let stored = SegmentPlan(storedText: text, total: t),
                part.size() >= stored.segments.filter({ $0.durable > $0.start }).map(\.durable).max() ?? 0
            {
                plan = stored
                offset = 0
            } else {
                // Ranges that cannot be resumed (no part, no validator): never splice, start over.
                resetToZero()
            }
        }
        bytes = plan?.fetchedBytes ?? offset
        total = record.total
    }

    /// Opens the part if one exists, then hashes the bytes it already holds on libuv's pool (a
    /// large part would block the loop) before the first request.
    override func start() throws {
        try prepare()
        let prefix = plan?.contiguousEnd ?? offset
        guard prefix > 0, let hasher else {
            try startFirstRequest()
            return
        }
        hasher.whenHashed(upTo: prefix) { ok in
            guard self.phase == .preparing else { return }
            if !ok { self.resetToZero() }  // bytes that cannot be read back cannot be verified
            do { try self.startFirstRequest() } catch {
                self.complete(failure: TransferError.from(error, retryable: true))
            }
        }
    }

    /// The attempt's first request: a segmented download resumes one of its unfinished ranges
    /// (the others follow once its response is checked); a whole one goes straight to finishing.
    private func startFirstRequest() throws {
        if var p = plan {
            guard let next = p.nextWork(busy: []) else {
                wholeAlready = true
                phase = .transferring
                finishAttempt()
                return
            }
            plan = p
            primarySegment = next
        }
        try startHop()
    }

    /// Checks (or creates) the directory and opens an existing part; `offset` is its size, cut
    /// back to the last checkpoint (one connection's part; a segmented one's ranges each resume
    /// from their own).
    private func openExistingPart(for dest: Destination) throws {
        try useDestination(dest)
        var st = stat()
        guard stat(dest.partPath, &st) == 0 else { return }
        try openPart(dest.partPath, fresh: false)
        let durable = record.durableBytes
        if record.segments == nil, offset > durable, !engine.isStopping(jobId), let part {
            // Every stop and failure checkpoints the whole part, so bytes past the checkpoint
            // were written by something else while the job was paused or failed: they are not
            // the server's, and would be spliced in. Cut back, as a restart does. (Not while the
            // last attempt's stop is still making its bytes durable: its checkpoint is to come.)
            let rc = part.truncate(to: durable)
            if rc != 0 { throw FileErrors.error(rc, "cannot cut \(part.path) back to its checkpoint") }
            Log.info("the part held \(offset - durable) bytes past its checkpoint: cut back to \(durable)", job: jobId)
            offset = durable
        }
    }

    /// Writes to `dest`'s part from now on, none open yet. The directory is created here with
    /// `--create-dirs`; without it, a missing one is found when the part is created
    /// (``missingDirectoryError(_:part:)``): one look fewer a job.
    private func useDestination(_ dest: Destination) throws {
        if record.request.createDirs == true {
            try Destination.ensureDirectory(dest.directory, create: true, mode: engine.config.directoryMode)
        }
        partPath = dest.partPath
        offset = 0
        part = nil
        hasher?.close()
        hasher = nil
    }

    /// The error of a part that could not be created: the directory's own
    /// (`destination_missing_dir` naming `--create-dirs`, or "is not a directory") when that was
    /// the cause, else `error` as it is.
    private func missingDirectoryError(_ error: TransferError, part path: String) -> TransferError {
        guard error.code == .destinationMissingDir else { return error }
        do {
            try Destination.ensureDirectory(
                Destination.directory(of: path), create: false, mode: engine.config.directoryMode)
        } catch let e as TransferError {
            return e
        } catch {}
        return error
    }

    /// Opens (creating) the part and a hasher of it. `fresh`: the download writes from byte 0, so
    /// whatever the file held is cut away (a stale part of another download is never spliced).
    private func openPart(_ path: String, fresh: Bool = true) throws {
        let p: PartFile
        do {
            p = try PartFile(loop: engine.loop, path: path, mode: engine.config.fileMode, truncate: fresh)
        } catch let e as TransferError {
            throw missingDirectoryError(e, part: path)
        }
        part = p
        offset = fresh ? 0 : p.size()
        hasher?.close()
        hasher = RangeHasher(loop: engine.loop, path: path)
    }

    override var overriddenHeaders: [String] { ["accept-encoding", "range", "if-range"] }

    /// The validator `If-Range` carries: a strong ETag, else Last-Modified.
    var ifRangeValue: String? {
        if let etag = record.etag, !etag.hasPrefix("W/") { return etag }
        return record.lastModified
    }

    override func extraHeaders() -> [String] {
        var h = ["Accept-Encoding: identity"]
        if offset > 0 || primarySegment != nil, let v = ifRangeValue { h.append("If-Range: \(v)") }
        return h
    }

    override func configure(_ options: inout CurlRequestOptions, _ easy: CurlEasy) {
        if let start = primarySegment, let seg = plan?.segment(start) {
            options.rangeFrom = seg.fetched
            options.rangeTo = seg.end - 1
        } else if offset > 0, ifRangeValue != nil {
            options.rangeFrom = offset
        } else if offset > 0 {
            // No validator (no strong ETag, no Last-Modified): without If-Range a range of
            // another version could be spliced on. The whole file is asked for; its 200 starts
            // the part over.
            Log.info("the part has no validator to resume with: asking for the whole file", job: jobId)
        } else if wantConnections > 1 && !singleOnly {
            // `bytes=0-` learns the size, the validator and whether ranges work.
            options.rangeFrom = 0
        }
        easy.onBody = { [unowned self] data in self.receive(data) }
    }

    override func responseHeadersComplete() {
        keepBody = false
        guard let s = lastStatus else { return }
        if primarySegment != nil {
            resumedSegmentHeaders(status: s)
            return
        }
        if s == 416 && offset > 0 {
            // The part is whole when the file's length (stated, else the one known) is the part's,
            // and a stated length does not contradict the one the part's bytes came with.
            let stated = contentRange()?.total
            let known = record.total
            let remote = stated ?? known
            if remote == offset && (stated == nil || known == nil || stated == known) {
                wholeAlready = true
                total = remote
            } else {
                // The remote file changed (or the server will not serve the rest): this request
                // ends and the download starts over from byte 0, in this attempt (as after a
                // `200` to a range: no retry is spent, the part is never spliced).
                let why: String
                if let stated, let known, stated != known {
                    why = "the remote file is now \(stated) bytes, not \(known)"
                } else if let remote, remote > offset {
                    why = "the server refused the rest of a \(remote)-byte file"
                } else {
                    why = "the remote file is shorter than the part"
                }
                startOver("HTTP 416: \(why)")
            }
            return
        }
        guard (200..<300).contains(s) else { return }
        if record.destination == nil {
            if !nameDestination() { return }
        }
        if s == 206 {
            guard let cr = contentRange(), cr.start == offset else {
                guard offset > 0 else {
                    // Nothing was asked for but the whole file: a partial answer without the
                    // file's start is the server's fault, and asking again gets the same.
                    abortError = TransferError(
                        .httpStatus, "HTTP 206 without the file's start to a request for the whole file",
                        retryable: false)
                    return
                }
                // Bytes from elsewhere in the file than asked: never written. This request ends
                // and the download starts over from byte 0, in this attempt (as after a `200`
                // to a range: no retry is spent).
                startOver("the server sent a range that does not match the part")
                return
            }
            if offset > 0, !validatorsMatch(etag: header("etag"), lastModified: header("last-modified")) {
                // A range of another version (a cache that ignored If-Range): never spliced on.
                // This request ends and the download starts over from byte 0, in this attempt.
                startOver("server answered 206 with another ETag or Last-Modified")
                return
            }
            if offset > 0, let stated = cr.total, let known = record.total, stated != known {
                // The same validators, another length: the file changed under them (an
                // inconsistent server). Its bytes are not spliced on the part's: started over.
                startOver("server answered 206 for a \(stated)-byte file, not \(known)")
                return
            }
            total = cr.total
        } else {
            if let cr = contentRange(), cr.start != 0 {
                // A whole answer (200) that says it holds only the file's end: a broken server or
                // cache. Taken as the file from byte 0, the end alone would complete as the file;
                // the part is kept, as for any refused answer.
                abortError = TransferError(
                    .httpStatus, "HTTP \(s) with Content-Range from byte \(cr.start): not the whole file",
                    retryable: false)
                return
            }
            // 200 (or another 2xx) to a ranged request: range ignored or content changed.
            if offset > 0 {
                Log.info("server answered \(s) to a range request: restarting from byte 0", job: jobId)
                resetToZero()
            }
            total = announcedLength
        }
        if let err = Self.lacksSpace(for: total, from: offset, partPath: partPath) {
            // The size is known now: the waiting job shows it (and how much is missing).
            var p = JobPatch()
            p.total = .some(total)
            write(p)
            abortError = err
            return
        }
        acceptBody()
        if s == 206 && offset == 0 && wantConnections > 1 && !singleOnly { beginSegments() }
    }

    // MARK: - Disk full (SPEC "Disk full and other faults")

    /// A `disk_full` error when a known size will not fit: the job waits for space before it
    /// writes a byte, instead of filling the disk and failing half way.
    static func lacksSpace(for total: Int64?, from offset: Int64, partPath: String?) -> TransferError? {
        guard let total, let partPath, total > offset else { return nil }
        let needed = total - offset
        // The part's directory: the part itself may not exist yet (one statvfs, not two).
        let dir = Destination.directory(of: partPath)
        guard let free = DiskSpace.available(at: dir.isEmpty ? partPath : dir), free < needed else { return nil }
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
        // A segmented part is not cut: each range resumes from its own checkpoint and writes over
        // what lies past it (cutting at the byte count would throw the later ranges away).
        guard error.code == .diskFull, plan == nil, let part else { return }
        _ = part.truncate(to: bytes)
    }

    /// Names the destination from Content-Disposition or the URL (directory mode).
    private func nameDestination() -> Bool {
        let dir = record.request.directory ?? FileManager.default.currentDirectoryPath
        let name = SuggestedFilename.suggest(contentDisposition: header("content-disposition"), url: record.url)
        let dest = Destination(path: Destination.path(of: name, in: dir))
        // Another job's path is refused here; an existing file is looked for here only when the
        // body will not be held: a held one is refused, with nothing written, just before its part
        // would be created (the `stat` of a name that 16 pool threads are filling a directory
        // with waited on the directory's lock, and on the loop; docs/benchmarks.md).
        let replace = record.request.replace == true
        if let holder = engine.holder(of: dest.path, except: jobId) {
            // The path stays the other job's: this one records no destination.
            abortError = dest.clash(replace: replace, heldBy: holder)
            return false
        }
        // Recorded before a clash with a file is reported: SPEC's `destination` is null only
        // until the name is known, and the job then shows which file is in the way.
        var p = JobPatch()
        p.destination = .some(dest.path)
        write(p)
        destinationUnchecked = !replace && bodyWillBeHeld
        if !destinationUnchecked, let err = dest.clash(replace: replace, heldBy: nil) {
            abortError = err
            return false
        }
        do {
            // A part already there is a stale one of another download: never spliced, cut to
            // nothing when the first byte creates ours (no look at it before).
            try useDestination(dest)
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

    /// Whether this response's body is announced small enough to be held in memory (a fresh
    /// `200` of at most ``heldBodyLimit`` bytes, on one connection), as ``receive(_:)`` decides.
    private var bodyWillBeHeld: Bool {
        guard lastStatus == 200, offset == 0, plan == nil, primarySegment == nil,
            let length = announcedLength
        else { return false }
        return length <= Self.heldBodyLimit
    }

    /// Throws away the part's bytes: the database first (durable 0), then the file.
    func resetToZero() {
        plan = nil
        primarySegment = nil
        held = nil  // a body held from an earlier answer of this attempt is not the new version's
        write(engine.checkpointer.discard(jobId))
        // The attempt's history follows the row: a crash before the next checkpoint leaves it at
        // 0 bytes of the new version, not at the old version's durable offset.
        engine.recordAttemptBytes(jobId, 0)
        _ = part?.truncate(to: 0)
        offset = 0
        bytes = 0
        hasher?.close()
        hasher = part.map { RangeHasher(loop: engine.loop, path: $0.path) }
    }

    func contentRange() -> (start: Int64, end: Int64?, total: Int64?)? {
        header("content-range").flatMap(HeaderLine.contentRange)
    }

    /// The body callback: appends bytes to the part (created with the first byte) and the digest.
    private func receive(_ data: UnsafeRawBufferPointer) -> CurlEasy.BodyVerdict {
        if fallbackRequested { return .abort }  // starting over: this response is not wanted
        guard keepBody else { return .accept }
        guard pace(data.count) else { return .pause }
        if let start = primarySegment, plan != nil {
            switch writeSegment(start, data) {
            case .accept: return .accept
            case .reachedEnd:
                primaryReachedEnd = true
                return .abort
            case .failed: return .abort
            }
        }
        if part == nil {
            guard let path = partPath else {
                abortError = TransferError(.io, "no destination to write to", retryable: false)
                return .abort
            }
            if plan == nil, let t = total, t <= Self.heldBodyLimit, bytes == Int64(held?.count ?? 0),
                (held?.count ?? 0) + data.count <= Self.heldBodyLimit
            {
                if hasher == nil { hasher = RangeHasher(loop: engine.loop, path: path) }
                if held == nil { held = [] }
                held!.append(contentsOf: data)
            } else {
                do { try writeHeldToPart() } catch {
                    abortError = TransferError.from(error, retryable: false)
                    return .abort
                }
            }
        }
        if held == nil {
            guard let part, let base = data.baseAddress else { return .accept }
            let rc = part.append(base, data.count, at: bytes)
            if rc != 0 {
                abortError = FileErrors.error(rc, "cannot write \(part.path)")
                return .abort
            }
        }
        let at = bytes
        progressed(to: bytes + Int64(data.count))
        hasher?.wrote(data, at: at)
        return .accept
    }

    /// Makes the bytes so far durable, then records the offset (bytes before bookkeeping).
    func checkpoint(then: (() -> Void)? = nil) {
        if held != nil {
            do { try writeHeldToPart() } catch {
                then?()  // the held bytes are lost with the attempt: the next one starts over
                return
            }
        }
        guard let part else {
            then?()
            return
        }
        let at = bytes
        checkpointRequestedAt = at
        let gen = engine.checkpointer.generation(jobId)
        if let offsets = plan?.fetchOffsets {
            // Every range's offset, once the bytes before it are synced.
            part.sync { ok in
                if ok && self.engine.checkpointer.generation(self.jobId) == gen { self.recordSegments(offsets) }
                then?()
            }
            return
        }
        part.sync { ok in
            if ok { self.engine.checkpointer.recorded(self.jobId, generation: gen, offset: at) }
            then?()
        }
    }

    /// Records the ranges' durable offsets (their bytes are synced).
    private func recordSegments(_ offsets: [Int64: Int64]) {
        guard var p = plan else { return }
        p.markDurable(offsets)
        plan = p
        var patch = JobPatch()
        patch.segments = .some(p.storedText)
        patch.durableBytes = p.durableBytes
        engine.writeCheckpoint(jobId, patch)
        engine.recordAttemptBytes(jobId, p.durableBytes)
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
            // The whole body is held (or empty): created, written and synced in one work item.
            finishHeld(path: path, dest: dest, report: report)
            return
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
            self.checkDigest(partPath: part.path, dest: dest, size: size, report: report)
        }
    }

    /// Once the part's `size` bytes are synced: their digest, then ``verified(partPath:dest:size:digest:report:)``.
    private func checkDigest(
        partPath: String, dest: String, size: Int64, report: @escaping (AttemptOutcome) -> Void
    ) {
        digest(of: partPath, size: size, report: report) { digest in
            self.verified(partPath: partPath, dest: Destination(path: dest), size: size, digest: digest, report: report)
        }
    }

    /// The hex SHA-256 of the body's first `size` bytes (``RangeHasher/finish(at:_:)``) given to
    /// `then`; no hasher, or bytes that could not be read back, fail the attempt instead.
    private func digest(
        of partPath: String, size: Int64, report: @escaping (AttemptOutcome) -> Void,
        then: @escaping (String) -> Void
    ) {
        guard let hasher else {
            report(.failed(TransferError(.io, "no digest for \(partPath)", retryable: false), retryAfter: nil))
            return
        }
        hasher.finish(at: size) { digest in
            guard let digest else {
                report(
                    .failed(
                        TransferError(.io, "cannot read back \(partPath) to hash it", retryable: true), retryAfter: nil)
                )
                return
            }
            then(digest)
        }
    }

    /// Creates the part (cut to nothing), writes the held bytes at its start and drops them:
    /// from here on the body goes to the part.
    func writeHeldToPart() throws {
        guard let path = partPath else { return }
        if destinationUnchecked, let dest = record.destination {
            // Not looked for at the headers (``destinationUnchecked``): looked for before the part is made.
            if let err = Destination(path: dest).clash(replace: false, heldBy: nil) { throw err }
            destinationUnchecked = false
        }
        let bytes = held ?? []
        held = nil
        let kept = hasher  // the held bytes are hashed already
        hasher = nil
        try openPart(path)
        if let kept {
            hasher?.close()
            hasher = kept
        }
        guard !bytes.isEmpty, let part else { return }
        let rc = bytes.withUnsafeBytes { part.append($0.baseAddress!, $0.count, at: 0) }
        if rc != 0 { throw FileErrors.error(rc, "cannot write \(part.path)") }
    }

    /// The end of a download whose body is all held (hashed as it arrived): the digest is
    /// checked, the job recorded as finalizing with the body's digest and length, and once that
    /// is committed the part is written, synced and moved into place with the next batch of small
    /// files (``SmallFileWriter``): one trip through the pool, shared. Recovery knows such a file by its digest
    /// (``Destination/holdsFinishedDownload(_:size:sha256:)``); the durable offset is recorded
    /// only once the bytes are synced (bytes before bookkeeping).
    private func finishHeld(path: String, dest: String, report: @escaping (AttemptOutcome) -> Void) {
        let bytes = held ?? []
        held = nil
        let size = self.bytes
        let gen = engine.checkpointer.generation(jobId)
        if hasher == nil { hasher = RangeHasher(loop: engine.loop, path: path) }  // an empty body
        digest(of: path, size: size, report: report) { digest in
            guard self.digestAccepted(digest, partPath: nil, report: report) else { return }
            var p = JobPatch()
            p.finalizing = true
            p.sha256 = .some(digest)
            p.total = .some(size)
            p.segments = .some(nil)
            self.recordFinalizingStatus(&p)
            self.write(p)
            self.engine.afterCommit {
                guard self.phase != .ended else { return }
                let item = SmallFileWriter.Item(
                    bytes: bytes, part: path, path: dest, mode: self.engine.config.fileMode,
                    replace: self.record.request.replace == true)
                self.engine.smallFileWriter.write(item) { outcome in
                    switch outcome {
                    case .inPlace:
                        report(.completed(sha256: digest))
                    case .notWritten(let e):
                        guard self.phase != .ended else { return }
                        self.bytes = 0  // nothing of the body is on disk: a retry starts over
                        self.write(Self.notFinalizing)
                        report(
                            .failed(
                                self.missingDirectoryError(FileErrors.error(e, "cannot write \(path)"), part: path),
                                retryAfter: nil))
                    case .refused(let error):
                        guard self.phase != .ended else { return }
                        self.bytes = 0  // nothing of the body is on disk: a retry starts over
                        self.write(Self.notFinalizing)
                        report(.failed(error, retryAfter: nil))
                    case .notMoved(let error):
                        guard self.phase != .ended else {
                            if self.discarded { unlink(path) }  // removed meanwhile: nothing may be left behind
                            return
                        }
                        self.engine.checkpointer.recorded(self.jobId, generation: gen, offset: size)
                        self.write(Self.notFinalizing)
                        report(.failed(error, retryAfter: nil))
                    }
                }
            }
        }
    }

    /// The change that ends a finalization that failed: no longer finalizing, and no digest (SPEC:
    /// `sha256` is the finished file's).
    private static var notFinalizing: JobPatch {
        var p = JobPatch()
        p.finalizing = false
        p.sha256 = .some(nil)
        return p
    }

    /// Whether `digest` is the one `--sha256` asks for (or none is asked for); if not, the part
    /// (when there is one) is deleted and the attempt fails with `checksum`.
    private func digestAccepted(
        _ digest: String, partPath: String?, report: @escaping (AttemptOutcome) -> Void
    ) -> Bool {
        guard let want = record.request.sha256, want.lowercased() != digest else { return true }
        if let partPath { PartFile.remove(partPath) }
        var p = engine.checkpointer.discard(jobId)
        p.sha256 = .some(nil)  // a digest an earlier attempt recorded is no finished file's
        write(p)
        report(
            .failed(
                TransferError(.checksum, "sha256 is \(digest), expected \(want)", retryable: false), retryAfter: nil))
        return false
    }

    /// The response's status goes into the finalizing row and the open attempt's history with
    /// it: a crash before the job is recorded completed leaves a job that recovery completes
    /// (its file in place) with the status it got, not null.
    private func recordFinalizingStatus(_ p: inout JobPatch) {
        guard let status = lastStatus else { return }
        p.httpStatus = .some(status)
        historyEntry.httpStatus = status
        engine.recordHistory(self)
    }

    /// Checks `--sha256`, records that the job is finalizing, and once that is committed moves
    /// the part into place (SPEC: the row before the rename, so recovery recognizes a rename a
    /// crash interrupted).
    private func verified(
        partPath: String, dest: Destination, size: Int64, digest: String, report: @escaping (AttemptOutcome) -> Void
    ) {
        guard phase != .ended, digestAccepted(digest, partPath: partPath, report: report) else { return }
        var p = JobPatch()
        p.finalizing = true
        p.durableBytes = size
        p.sha256 = .some(digest)
        p.segments = .some(nil)
        recordFinalizingStatus(&p)
        write(p)
        engine.afterCommit {
            guard self.phase != .ended else { return }
            dest.moveIntoPlace(
                from: partPath, replace: self.record.request.replace == true, syncer: self.engine.directorySyncer
            ) { error in
                guard let error else {
                    report(.completed(sha256: digest))
                    return
                }
                self.write(Self.notFinalizing)
                report(.failed(error, retryAfter: nil))
            }
        }
    }

    override func failed(_ error: TransferError, then: @escaping () -> Void) {
        stopConnections()
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
        PartFile.remove(path, onlyEmpty: true)
    }

    override func stopped(_ reason: StopReason, then: @escaping () -> Void) {
        if reason == .cancel {
            discarded = true
            held = nil
            hasher?.close()
            if let partPath {
                PartFile.remove(partPath)
                engine.partDeleted(partPath)
            }
            part?.close()
            write(engine.checkpointer.discard(jobId))
            then()
            return
        }
        failed(TransferError(.cancelled, "stopped"), then: then)
    }

    /// Synchronous checkpoint for shutdown: fdatasync on the loop, then the row.
    override func checkpointNow() {
        if held != nil { try? writeHeldToPart() }
        guard let part else { return }
        if let offsets = plan?.fetchOffsets {
            if fdatasync(part.fd) == 0 { recordSegments(offsets) }
            return
        }
        if fdatasync(part.fd) == 0 {
            engine.checkpointer.recorded(jobId, generation: engine.checkpointer.generation(jobId), offset: bytes)
        }
    }

    // MARK: - Segments (what must be in the class: the overrides; the rest in DownloadTask+Segments.swift)

    /// Failed range requests an attempt tolerates at most (each also lowers the connections
    /// wanted by one: a server may refuse more than a few); the job's retries left bound it too.
    static let maxConnectionFailures = 8

    /// How a segment's bytes were taken.
    enum SegmentWrite {
        /// All written.
        case accept
        /// Written up to the segment's end; the rest belongs to another segment.
        case reachedEnd
        /// The write failed (``abortError`` is set).
        case failed
    }

    /// Whether this attempt asked for the rest after a short answer (``followUp()``): its
    /// history's `total` then covers all its requests, not the last one's timeline.
    private var followedUp = false

    /// A `206` that covered less than was asked (`bytes A-C/T`, C + 1 < T: RFC 9110 lets a server
    /// send less) and brought all it said: the next request of this attempt asks for the rest
    /// (`Range` from C + 1 with `If-Range`), rather than the attempt ending as a partial transfer
    /// and spending a retry. Answers of fewer than ``shortRangeMinimum`` bytes end it as before.
    /// (A segmented download's ranges: ``answeredShortRange(_:error:range:)``.)
    override func followUp() -> Bool {
        guard plan == nil, primarySegment == nil, lastStatus == 206, ifRangeValue != nil, let cr = contentRange(),
            let end = cr.end, let t = cr.total, end + 1 < t, bytes == end + 1,
            end - cr.start + 1 >= Self.shortRangeMinimum
        else { return false }
        Log.info("the server answered up to byte \(end) of \(t): asking for the rest", job: jobId)
        followedUp = true
        offset = bytes
        do { try startRequest(url: currentURL) } catch {
            complete(failure: TransferError.from(error, retryable: true))
        }
        return true
    }

    /// This task's own request ended: while segmented, it was one connection among several.
    override func hopEnded(error: TransferError?) -> Bool {
        if fallbackRequested {
            schedulePump()
            return true
        }
        guard plan != nil, primaryAccepted else { return false }
        primaryAccepted = false
        let start = primarySegment
        primarySegment = nil
        let done = start.flatMap { plan?.segment($0)?.isComplete } ?? true
        let failed = !primaryReachedEnd && !done
        primaryReachedEnd = false
        if failed && !(start.map { answeredShortRange($0, error: error, range: contentRange()) } ?? false) {
            let failure = error ?? TransferError(.network, "a range ended early", retryable: true)
            let retryAfter = RetryPolicy.retryAfter(status: status, value: header("retry-after"))
            if !rangeFailed(failure, retryAfter: retryAfter) { return true }
        }
        schedulePump()
        return true
    }

    override func halt() {
        stopConnections()
        pumpTimer?.close()
        pumpTimer = nil
        holdTimer?.close()
        holdTimer = nil
        super.halt()
    }

    /// A segmented attempt's `total` is the attempt's, its ranges' included: the first request's
    /// timeline ended with its own range (an outside audit: 4.99 s for an attempt of 20.1 s).
    override func closeHistory(error: TransferError?) {
        super.closeHistory(error: error)
        guard plan != nil || followedUp else { return }
        let elapsed = Double(engine.loop.nowMillis &- attemptStartedAt) / 1000
        historyEntry.total = max(historyEntry.total ?? 0, elapsed)
    }

    /// Resumes every connection a limit paused, starting with the next one each time: libcurl
    /// hands a resumed connection's held bytes over inside the call, so the first one resumed
    /// took the whole budget and the others read nothing for as long as the limit held (a server's
    /// send timeout then cut them, each cut a failed range).
    override func resumePaced() {
        var easies = connections.filter(\.isActive).map(\.easy)
        if let easy { easies.insert(easy, at: 0) }
        guard !easies.isEmpty else { return }
        let first = resumeTurn % easies.count
        resumeTurn &+= 1
        for i in 0..<easies.count { engine.multi.unpause(easies[(first + i) % easies.count]) }
    }

    override var openConnections: Int {
        plan == nil ? super.openConnections : segmentConnections(countingQueued: false)
    }

    /// Connections held or asked for (libcurl's queue for the host included): what the host cap counts.
    override var hostConnections: Int {
        let held = plan == nil ? super.hostConnections : segmentConnections(countingQueued: true)
        return multiplexed ? min(1, held) : held
    }

    override var segmentProgress: [SegmentProgress]? {
        plan?.segments.map { SegmentProgress(start: $0.start, end: $0.end, bytes: $0.fetched - $0.start) }
    }
}
