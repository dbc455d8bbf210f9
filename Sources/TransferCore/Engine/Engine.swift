import CCurl
import Foundation

/// Settings of the engine (daemon flags).
public struct EngineConfig: Sendable {
    /// The default of `--max-active`.
    public static let defaultMaxActive = 4
    /// The default stall window: under 1 byte/s for this long ends an attempt.
    public static let defaultStallTimeout = 30.0
    /// The default checkpoint interval while bytes flow.
    public static let defaultCheckpointInterval = 1.0

    public var maxActive = EngineConfig.defaultMaxActive
    public var stallTimeout = EngineConfig.defaultStallTimeout
    public var checkpointInterval = EngineConfig.defaultCheckpointInterval
    /// Mode for files the daemon creates for the user (0666 less the user's umask; the daemon
    /// itself runs with umask 077).
    public var fileMode: mode_t = 0o644
    /// Mode for directories created by `--create-dirs`.
    public var directoryMode: mode_t = 0o755

    public init() {}
}

/// The transfer engine: the job state machine, the scheduler, retries and checkpoints, on top of
/// the store and one curl multi handle. Loop-thread only.
public final class Engine {
    let loop: EventLoop
    let store: JobStore
    let multi: CurlMulti
    let config: EngineConfig
    private var tasks: [Int64: TransferTask] = [:]
    private var byEasy: [UnsafeMutableRawPointer: TransferTask] = [:]
    private var retryTimers: [Int64: LoopTimer] = [:]
    private var generations: [Int64: Int] = [:]
    private let tick: LoopTimer
    private var lastCheckpointAt: UInt64 = 0
    private var shuttingDown = false
    private var lastProgressEvent: [Int64: Int64] = [:]
    /// Bytes a download's last attempt left in its part (written, maybe not yet checkpointed), so
    /// a paused or waiting job never shows fewer bytes than it just did. Memory only: after a
    /// restart the part is cut back to its checkpoint anyway.
    private var lastBytes: [Int64: Int64] = [:]
    /// Receives `transfer.progress` / `transfer.state` events with the job object.
    public var onEvent: ((String, JobSnapshot) -> Void)?
    /// Whether the network is reachable (from the NetworkMonitor). Never stops a request.
    public private(set) var isReachable = true
    /// Jitter source in -1...1 (replaceable for tests).
    var jitter: () -> Double = { Double.random(in: -1...1) }

    /// Creates the engine; call ``recover()`` then ``start()``.
    public init(loop: EventLoop, store: JobStore, config: EngineConfig) throws {
        self.loop = loop
        self.store = store
        self.config = config
        self.multi = try CurlMulti(loop: loop)
        self.tick = LoopTimer(loop: loop)
        multi.onDone = { [unowned self] easy, code in self.handleDone(easy, code) }
    }

    // MARK: - Life cycle

    /// Brings the store in line with the disk after a stop or a crash: part files are cut back to
    /// their checkpoint, interrupted jobs are queued again, finished renames are recognized.
    public func recover() throws {
        let now = Timestamp.now()
        for var r in try store.jobs(inStates: [.queued, .running, .waiting, .paused, .failed]) {
            guard let id = r.id else { continue }
            var changed = false
            if r.kind == "download", let dest = r.destination {
                let part = DownloadTask.partPath(dest)
                var st = stat()
                let partExists = stat(part, &st) == 0
                if r.finalizing && !partExists && FileManager.default.fileExists(atPath: dest) {
                    // Crashed between the rename and the row update: the file is in place.
                    r.state = .completed
                    r.completedAt = now
                    r.finalizing = false
                    r.durableBytes = r.total ?? r.durableBytes
                    changed = true
                } else if partExists {
                    let size = Int64(st.st_size)
                    if size > r.durableBytes {
                        if truncate(part, off_t(r.durableBytes)) != 0 {
                            Log.info("cannot cut \(part) back to its checkpoint: \(String(cString: strerror(errno)))", job: id)
                        }
                    } else if size < r.durableBytes {
                        r.durableBytes = size
                        changed = true
                    }
                } else if r.durableBytes > 0 {
                    r.durableBytes = 0
                    changed = true
                }
            }
            if r.state == .running {
                r.state = .queued
                if var last = r.history.popLast() {
                    if last.endedAt == nil { last.endedAt = Timestamp.rfc3339(now) }
                    r.history.append(last)
                }
                changed = true
            }
            if changed {
                let copy = r
                try store.update(id) { $0 = copy }
                if copy.state == .completed { Log.info("recovered: completed \(r.destination ?? "")", job: id) }
            }
        }
    }

    /// Starts the periodic tick and the scheduler; arms timers of waiting jobs.
    public func start() {
        tick.start(after: 250, repeating: 250) { [unowned self] in self.onTick() }
        for r in (try? store.jobs(inStates: [.waiting])) ?? [] {
            guard let id = r.id else { continue }
            if r.waitReason == "offline" {
                if isReachable { _ = transition(id, to: .queued) { $0.waitReason = nil } }
            } else {
                armRetry(id, at: r.nextRetryAt ?? Timestamp.now())
            }
        }
        schedule()
    }

    /// Stops every transfer with a synchronous checkpoint and queues them for the next start.
    public func shutdown() {
        shuttingDown = true
        tick.close()
        for (_, t) in retryTimers { t.close() }
        retryTimers = [:]
        for (id, task) in tasks {
            if let e = task.easy, task.isInMulti {
                multi.remove(e.handle)
                byEasy[e.handle] = nil
                task.isInMulti = false
            }
            (task as? DownloadTask)?.checkpointNow()
            endHistory(id, task: task, error: nil)
            _ = transition(id, to: .queued, event: false) { _ in }
            Log.info("checkpointed at \(task.bytes) bytes for shutdown", job: id)
        }
        tasks = [:]
    }

    // MARK: - Scheduling

    /// Starts queued jobs while slots are free: highest priority first, then oldest.
    public func schedule() {
        guard !shuttingDown else { return }
        let free = config.maxActive - tasks.count
        guard free > 0, let queued = try? store.jobs(inStates: [.queued]) else { return }
        for r in queued.prefix(free) { startJob(r) }
    }

    private func startJob(_ r: JobRecord) {
        guard let id = r.id else { return }
        let startedAt = Timestamp.rfc3339(Timestamp.now())
        guard let running = transition(id, to: .running, { r in
            r.attempts += 1
            r.error = nil
            r.waitReason = nil
            r.nextRetryAt = nil
            r.history.append(AttemptRecord(attempt: r.attempts, startedAt: startedAt, bytes: r.durableBytes))
        }) else { return }
        lastBytes[id] = nil
        let task: TransferTask = running.kind == "upload"
            ? UploadTask(engine: self, record: running) : DownloadTask(engine: self, record: running)
        tasks[id] = task
        Log.info("attempt \(running.attempts): \(running.method) \(URLRedaction.redact(running.url))", job: id)
        do {
            try task.start()
        } catch {
            let err = error as? TransferError ?? TransferError(.io, "\(error)", retryable: false)
            if let e = task.easy, task.isInMulti {
                multi.remove(e.handle)
                byEasy[e.handle] = nil
                task.isInMulti = false
            }
            task.failed(err) { self.attemptEnded(task, .failed(err, retryAfter: nil)) }
        }
    }

    func register(_ task: TransferTask, easy: UnsafeMutableRawPointer) {
        byEasy[easy] = task
    }

    private func handleDone(_ easy: UnsafeMutableRawPointer, _ code: CURLcode) {
        multi.remove(easy)
        guard let task = byEasy.removeValue(forKey: easy) else { return }
        task.finish(code: code)
    }

    /// Records the end of an attempt and moves the job on: completed, waiting for a retry, or failed.
    func attemptEnded(_ task: TransferTask, _ outcome: AttemptOutcome) {
        let id = task.jobId
        guard tasks[id] === task else { return }  // already stopped by the user
        tasks[id] = nil
        lastProgressEvent[id] = nil
        if task is DownloadTask, case .failed(let e, _) = outcome, e.code != .checksum { lastBytes[id] = task.bytes }
        switch outcome {
        case .completed(let digest):
            endHistory(id, task: task, error: nil)
            let bytes = task.bytes
            _ = transition(id, to: .completed) { r in
                r.sha256 = digest
                r.durableBytes = bytes
                r.total = bytes
                r.finalizing = false
                r.completedAt = Timestamp.now()
                r.error = nil
            }
            Log.info("completed: \(bytes) bytes, sha256 \(digest)", job: id)
        case .failed(var err, let retryAfter):
            guard let r = try? store.job(id) else { break }
            let policy = RetryPolicy(retryLimit: r.request.retries ?? RetryPolicy.defaultRetryLimit)
            let networkClass = err.code == .network || err.code == .timeout
            if err.retryable && networkClass && !isReachable {
                endHistory(id, task: task, error: err)
                _ = transition(id, to: .waiting) { r in
                    r.error = err
                    r.waitReason = "offline"
                    r.nextRetryAt = nil
                }
                Log.info("offline: waiting for the network (\(err.message))", job: id)
            } else if err.retryable && policy.shouldRetry(error: err, retriesUsed: r.retriesUsed) {
                let k = r.retriesUsed + 1
                let delay = policy.delay(forRetry: k, retryAfter: retryAfter, jitter: jitter())
                let at = Timestamp.now() + delay
                endHistory(id, task: task, error: err)
                _ = transition(id, to: .waiting) { r in
                    r.retriesUsed = k
                    r.error = err
                    r.waitReason = "backoff"
                    r.nextRetryAt = at
                }
                armRetry(id, at: at)
                Log.info("retry \(k) in \(String(format: "%.2f", delay)) s: \(err.code.rawValue): \(err.message)", job: id)
            } else {
                err.retryable = false
                endHistory(id, task: task, error: err)
                _ = transition(id, to: .failed) { r in r.error = err }
                Log.info("failed: \(err.code.rawValue): \(err.message)", job: id)
            }
        }
        schedule()
    }

    private func armRetry(_ id: Int64, at: Double) {
        retryTimers[id]?.close()
        let t = LoopTimer(loop: loop)
        retryTimers[id] = t
        let wait = (at - Timestamp.now()) * 1000
        let ms = wait.isFinite ? UInt64(min(max(0, wait), 1e12)) : 0
        t.start(after: ms) { [unowned self] in
            self.retryTimers[id]?.close()
            self.retryTimers[id] = nil
            _ = self.transition(id, to: .queued) { r in
                r.waitReason = nil
                r.nextRetryAt = nil
            }
            self.schedule()
        }
    }

    private func endHistory(_ id: Int64, task: TransferTask, error: TransferError?) {
        var a = AttemptRecord(attempt: 0, startedAt: "")
        task.fillTimeline(&a)
        let status = task.status
        let bytes = task.bytes
        updateRecord(id) { r in
            guard var last = r.history.popLast() else { return }
            last.endedAt = Timestamp.rfc3339(Timestamp.now())
            last.httpStatus = status
            last.bytes = bytes
            last.nameLookup = a.nameLookup
            last.connect = a.connect
            last.tls = a.tls
            last.firstByte = a.firstByte
            last.total = a.total
            last.error = error
            r.history.append(last)
            if let status { r.httpStatus = status }
        }
    }

    // MARK: - State machine

    /// Moves a job to `state` in its own transaction, then tells subscribers. Returns the new row,
    /// or nil when the transition is not legal (nothing is written then).
    @discardableResult
    func transition(_ id: Int64, to state: TransferState, event: Bool = true, _ change: (inout JobRecord) -> Void = { _ in })
        -> JobRecord?
    {
        var legal = true
        let r = try? store.update(id) { r in
            guard r.state.canTransition(to: state) else {
                legal = false
                return
            }
            r.state = state
            change(&r)
        }
        guard legal, let r else { return nil }
        if event { onEvent?(RPCMethod.stateEvent, snapshot(r)) }
        return r
    }

    /// Changes a job's row in one transaction (no state change).
    @discardableResult
    func updateRecord(_ id: Int64, _ change: (inout JobRecord) -> Void) -> JobRecord? {
        do {
            return try store.update(id) { change(&$0) }
        } catch {
            Log.info("store update failed: \(error)", job: id)
            return nil
        }
    }

    // MARK: - Checkpoints

    func checkpointGeneration(_ id: Int64) -> Int { generations[id, default: 0] }

    /// Makes pending checkpoints of a job's part stale (its bytes were thrown away).
    func invalidateCheckpoints(_ id: Int64) { generations[id, default: 0] += 1 }

    /// Records a durable offset, unless the part was reset since the sync began.
    func recordCheckpoint(_ id: Int64, generation: Int, offset: Int64) {
        guard generations[id, default: 0] == generation else { return }
        updateRecord(id) { r in
            r.durableBytes = offset
            // Keep the open attempt's byte count current, so a crash leaves a true history.
            if var last = r.history.popLast() {
                if last.endedAt == nil { last.bytes = offset }
                r.history.append(last)
            }
        }
    }

    private func onTick() {
        let now = loop.nowMillis
        // Stalls: no byte for the stall window ends the attempt (libcurl's low-speed check
        // averages over several seconds and fires late).
        let window = UInt64(config.stallTimeout * 1000)
        for (_, t) in tasks where t.isInMulti && now &- t.lastProgressAt > window {
            guard let e = t.easy else { continue }
            multi.remove(e.handle)
            byEasy[e.handle] = nil
            t.isInMulti = false
            let secs = Int(config.stallTimeout)
            t.complete(failure: TransferError(.timeout, "stalled: under 1 byte/s for \(secs) s", retryable: true))
        }
        for (_, t) in tasks { t.rate.sample(bytes: t.bytes, now: now) }
        // One read of the running rows per tick, and only when some transfer moved.
        let moved = tasks.filter { lastProgressEvent[$0.key] != $0.value.bytes }
        if !moved.isEmpty, onEvent != nil, let rows = try? store.jobs(inStates: [.running]) {
            for r in rows {
                guard let id = r.id, let t = moved[id] else { continue }
                lastProgressEvent[id] = t.bytes
                onEvent?(RPCMethod.progressEvent, snapshot(r))
            }
        }
        if Double(now - lastCheckpointAt) >= config.checkpointInterval * 1000 {
            lastCheckpointAt = now
            for (_, t) in tasks where t.isInMulti {
                if let d = t as? DownloadTask, d.bytes != d.checkpointRequestedAt { d.checkpoint() }
            }
        }
    }

    // MARK: - Files

    /// The mode of files and directories created for the user.
    func ensureDirectory(_ dir: String, create: Bool) throws {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: dir, isDirectory: &isDir) {
            if isDir.boolValue { return }
            throw TransferError(.destinationMissingDir, "\(dir) is not a directory", retryable: false)
        }
        guard create else {
            throw TransferError(.destinationMissingDir, "directory \(dir) does not exist (use --create-dirs)", retryable: false)
        }
        do {
            // Create each missing level with the user's mode (the daemon's umask is 077).
            var missing: [String] = []
            var cur = dir
            while !cur.isEmpty && cur != "/" && !FileManager.default.fileExists(atPath: cur) {
                missing.append(cur)
                cur = (cur as NSString).deletingLastPathComponent
            }
            for d in missing.reversed() {
                try FileManager.default.createDirectory(atPath: d, withIntermediateDirectories: false)
                chmod(d, config.directoryMode)
            }
        } catch {
            throw TransferError(.destinationMissingDir, "cannot create \(dir): \(error.localizedDescription)", retryable: false)
        }
    }

    /// A `destination_exists` error if `dest` exists (without replace) or another unfinished job
    /// targets it.
    func destinationConflict(_ dest: String, job: Int64?, replace: Bool) -> TransferError? {
        if let others = try? store.jobs(inStates: [.queued, .running, .waiting, .paused, .failed]),
            others.contains(where: { $0.kind == "download" && $0.destination == dest && $0.id != job })
        {
            return TransferError(.destinationExists, "another job downloads to \(dest)", retryable: false)
        }
        if !replace && FileManager.default.fileExists(atPath: dest) {
            return TransferError(.destinationExists, "\(dest) exists (use --replace)", retryable: false)
        }
        return nil
    }

    /// Moves a verified part into place: row first (finalizing), then the rename, then the
    /// directory's fsync.
    func finalize(jobId: Int64, part: String, destination: String, size: Int64, digest: String, replace: Bool)
        -> AttemptOutcome
    {
        var isDir: ObjCBool = false
        if FileManager.default.fileExists(atPath: destination, isDirectory: &isDir) {
            if !replace || isDir.boolValue {
                return .failed(TransferError(.destinationExists, "\(destination) exists", retryable: false), retryAfter: nil)
            }
        }
        updateRecord(jobId) { r in
            r.finalizing = true
            r.durableBytes = size
            r.sha256 = digest
        }
        if rename(part, destination) != 0 {
            let e = errno
            updateRecord(jobId) { $0.finalizing = false }
            return .failed(FileErrors.error(e, "cannot move the download into \(destination)"), retryAfter: nil)
        }
        FileSync.syncDirectory((destination as NSString).deletingLastPathComponent)
        return .completed(sha256: digest)
    }

    // MARK: - Network

    /// Reacts to reachability: on return, waiting-offline jobs start and silent transfers restart.
    public func setReachable(_ reachable: Bool) {
        let was = isReachable
        isReachable = reachable
        Log.info("network \(reachable ? "reachable" : "unreachable")")
        guard reachable, !was, !shuttingDown else { return }
        for r in (try? store.jobs(inStates: [.waiting])) ?? [] where r.waitReason == "offline" {
            guard let id = r.id else { continue }
            _ = transition(id, to: .queued) { $0.waitReason = nil }
        }
        let now = loop.nowMillis
        for (id, t) in tasks where t.isInMulti && now - t.lastProgressAt > 5000 {
            Log.info("network returned: restarting a silent transfer", job: id)
            stop(id, reason: .restart, to: .queued)
        }
        schedule()
    }

    // MARK: - Control (RPC)

    /// Stops a running attempt and moves the job to `state`.
    private func stop(_ id: Int64, reason: StopReason, to state: TransferState) {
        guard let task = tasks[id] else { return }
        task.stopReason = reason
        if let e = task.easy, task.isInMulti {
            multi.remove(e.handle)
            byEasy[e.handle] = nil
            task.isInMulti = false
        }
        tasks[id] = nil
        lastProgressEvent[id] = nil
        if task is DownloadTask && reason != .cancel { lastBytes[id] = task.bytes }
        endHistory(id, task: task, error: reason == .cancel ? TransferError(.cancelled, "cancelled by the user") : nil)
        _ = transition(id, to: state) { r in
            if reason == .cancel { r.error = TransferError(.cancelled, "cancelled by the user", retryable: false) }
        }
        task.stopped(reason) { [weak self] in self?.schedule() }
    }

    /// Whether a job's attempt is finishing (verified, being moved into place).
    private func isFinishing(_ id: Int64) -> Bool {
        if let t = tasks[id] { return !t.isInMulti && !t.isPreparing }
        return false
    }

    /// Applies a control command to each id; returns the jobs acted on and the refusals.
    public func control(_ method: String, ids: [Int64], deleteFiles: Bool) -> ControlResult {
        var done: [JobSnapshot] = []
        var refused: [ControlRefusal] = []
        for id in ids {
            guard let r = try? store.job(id) else {
                refused.append(ControlRefusal(id: id, state: nil, message: "job \(id) does not exist"))
                continue
            }
            if isFinishing(id) && method != RPCMethod.remove {
                refused.append(ControlRefusal(id: id, state: r.state, message: "job \(id) is finishing"))
                continue
            }
            var result: JobRecord?
            switch (method, r.state) {
            case (RPCMethod.pause, .running):
                stop(id, reason: .pause, to: .paused)
                result = try? store.job(id)
            case (RPCMethod.pause, .queued), (RPCMethod.pause, .waiting):
                cancelRetryTimer(id)
                result = transition(id, to: .paused) { r in
                    r.waitReason = nil
                    r.nextRetryAt = nil
                }
            case (RPCMethod.resume, .paused):
                result = transition(id, to: .queued) { $0.error = nil }
            case (RPCMethod.retry, .failed), (RPCMethod.retry, .cancelled):
                result = transition(id, to: .queued) { r in
                    r.retriesUsed = 0
                    r.error = nil
                }
            case (RPCMethod.cancel, let s) where !s.isFinal:
                if s == .running {
                    stop(id, reason: .cancel, to: .cancelled)
                    result = try? store.job(id)
                } else {
                    cancelRetryTimer(id)
                    removePart(r)
                    result = transition(id, to: .cancelled) { r in
                        r.error = TransferError(.cancelled, "cancelled by the user", retryable: false)
                        r.waitReason = nil
                        r.nextRetryAt = nil
                        r.durableBytes = 0
                    }
                }
            case (RPCMethod.remove, let s):
                if s == .running, tasks[id]?.isInMulti == true { stop(id, reason: .cancel, to: .cancelled) }
                cancelRetryTimer(id)
                let last = (try? store.job(id)) ?? r
                if last.state != .completed { removePart(last) }
                if deleteFiles, last.kind == "download", last.state == .completed, let dest = last.destination {
                    unlink(dest)
                }
                try? store.delete(id)
                done.append(snapshot(last))
                continue
            default:
                refused.append(ControlRefusal(id: id, state: r.state, message: refusal(method, id, r.state)))
                continue
            }
            if let result { done.append(snapshot(result)) }
        }
        schedule()
        return ControlResult(jobs: done, refused: refused)
    }

    private func refusal(_ method: String, _ id: Int64, _ state: TransferState) -> String {
        let verb = method.split(separator: ".").last.map(String.init) ?? method
        return "cannot \(verb) job \(id): it is \(state.rawValue)"
    }

    private func cancelRetryTimer(_ id: Int64) {
        retryTimers[id]?.close()
        retryTimers[id] = nil
    }

    private func removePart(_ r: JobRecord) {
        if let id = r.id { lastBytes[id] = nil }
        if r.kind == "upload", let response = r.request.response {
            // A response file being written when the daemon stopped.
            unlink(DownloadTask.partPath(response))
            return
        }
        guard r.kind == "download", let dest = r.destination, let id = r.id else { return }
        invalidateCheckpoints(id)
        unlink(DownloadTask.partPath(dest))
    }

    // MARK: - Adding and reading jobs

    /// Validates and queues a new job (SPEC: refused input changes nothing).
    public func add(_ request: TransferRequest) throws -> JobSnapshot {
        let req = try RequestValidator.validate(request)
        let kind = req.kind ?? "download"
        var destination: String?
        var sourceSize: Int64?
        var sourceMtime: Double?
        var stamps: [SourceStamp]?
        var total: Int64?
        if kind == "download" {
            if let dest = req.destination {
                if let err = destinationConflict(dest, job: nil, replace: req.replace == true) {
                    throw RPCError.refusedInput(err.code, err.message)
                }
                destination = dest
            }
        } else {
            // The file, or every file part of a form: size and mtime for source_changed.
            let source = try UploadTask.inspectSources(of: req)
            destination = source.path
            sourceSize = source.size
            sourceMtime = source.modificationTime
            total = source.payloadLength
            stamps = source.stamps
        }
        let now = Timestamp.now()
        let record = JobRecord(
            id: nil, kind: kind, url: req.url, method: req.method ?? (kind == "download" ? "GET" : "PUT"),
            state: .queued, request: req, destination: destination, durableBytes: 0, total: total, etag: nil,
            lastModified: nil, attempts: 0, retriesUsed: 0, httpStatus: nil, error: nil, waitReason: nil,
            nextRetryAt: nil, priority: req.priority ?? 0, finalizing: false, sha256: nil, sourceSize: sourceSize,
            sourceMtime: sourceMtime, response: nil, history: [], createdAt: now, updatedAt: now, completedAt: nil,
            sources: stamps)
        let inserted: JobRecord
        do {
            inserted = try store.insert(record)
        } catch {
            throw RPCError(code: RPCErrorCode.internalError, message: "cannot store the job: \(error)")
        }
        guard let id = inserted.id else { throw RPCError(code: RPCErrorCode.internalError, message: "no id") }
        Log.info("queued \(kind) \(URLRedaction.redact(req.url))", job: id)
        onEvent?(RPCMethod.stateEvent, snapshot(inserted))
        schedule()
        return snapshot((try? store.job(id)) ?? inserted)
    }

    /// The job object of one job, or nil.
    public func get(_ id: Int64) -> JobSnapshot? {
        (try? store.job(id)).flatMap { $0 }.map(snapshot)
    }

    /// All job objects, oldest first.
    public func list(state: TransferState?) -> [JobSnapshot] {
        ((try? store.jobs(state: state)) ?? []).map(snapshot)
    }

    /// The stored row of a job (for `transfer.curl`).
    public func record(_ id: Int64) -> JobRecord? { (try? store.job(id)).flatMap { $0 } }

    /// Number of jobs in each state.
    public func counts() -> [String: Int] { (try? store.counts()) ?? [:] }

    /// Builds the job object from a row and, while running, the live task.
    public func snapshot(_ r: JobRecord) -> JobSnapshot {
        let id = r.id ?? 0
        let task = r.state == .running ? tasks[id] : nil
        var bytes = task?.bytes ?? max(r.durableBytes, lastBytes[id] ?? 0)
        let total = task?.total ?? r.total
        if r.state == .completed, let total { bytes = total }
        let rate = task?.rate.value ?? 0
        var fraction: Double?
        if let total { fraction = total > 0 ? min(1, Double(bytes) / Double(total)) : 1 }
        var eta: Double?
        if let total, r.state == .running, rate > 0 { eta = max(0, Double(total - bytes) / rate) }
        if r.state == .completed { eta = 0 }
        return JobSnapshot(
            id: id, kind: r.kind, url: URLRedaction.redact(r.url), method: r.method, state: r.state,
            destination: r.destination, bytes: bytes, total: total, fraction: fraction, rate: rate, eta: eta,
            attempts: r.attempts, httpStatus: r.httpStatus, error: r.error, waitReason: r.waitReason,
            nextRetryAt: r.nextRetryAt.map(Timestamp.rfc3339), insecure: r.request.insecure == true, sha256: r.sha256,
            createdAt: Timestamp.rfc3339(r.createdAt), updatedAt: Timestamp.rfc3339(r.updatedAt),
            completedAt: r.completedAt.map(Timestamp.rfc3339), history: r.history, response: r.response)
    }
}
