import Foundation

/// What the engine tells its listeners (the RPC server turns them into notifications).
public enum EngineNotification: Sendable {
    /// A job changed state; the change is committed (`transfer.state`).
    case stateChanged
    /// A job was queued; its row is committed (`transfer.state`, which a subscriber may decline:
    /// the client that queued it has it from the answer).
    case added
    /// A running job moved (`transfer.progress`, at most about 4 a second a job).
    case progress
    /// A job was removed; its row is deleted (`transfer.removed`, with its last object).
    case removed
}

/// Settings of the engine (daemon flags).
public struct EngineConfig: Sendable {
    /// The default of `--max-active`.
    public static let defaultMaxActive = 4
    /// The default stall window: under 1 byte/s for this long ends an attempt.
    public static let defaultStallTimeout = 30.0
    /// The default checkpoint interval while bytes flow.
    public static let defaultCheckpointInterval = Checkpointer.defaultInterval
    /// libuv's pool threads: completions fdatasync, hash and fsync directories there in parallel.
    public static let poolThreads = 16
    /// Rows of newly queued jobs kept in memory so that starting them needs no read (a queued
    /// job's read was a fifth of the daemon's work a small file); at most this many.
    public static let queuedRecordCacheLimit = 4096
    /// The default of ``homeReserve``.
    public static let defaultHomeReserve: Int64 = 1 << 20
    /// How often a failing group commit is tried again (seconds), instead of on every loop pass.
    public static let commitRetryInterval = 0.5

    /// Requests that would add or change a job are refused while less than this many bytes are
    /// free on the file system of the job database (SPEC "Disk full": the home is full).
    public var homeReserve = EngineConfig.defaultHomeReserve

    /// The default of `--max-per-host`: TCP connections to one host and port, all jobs together.
    public static let defaultMaxPerHost = 8
    /// The default of `--connections` (a download's connections when it names none).
    public static let defaultConnections = 1
    /// The most connections a download may use (`--connections`, `-x`).
    public static let maxConnections = RequestValidator.connectionsRange.upperBound

    /// `--max-active`: transfers at once.
    public var maxActive = EngineConfig.defaultMaxActive
    /// `--max-per-host`.
    public var maxPerHost = EngineConfig.defaultMaxPerHost
    /// `--connections`: a download's connections unless its request names them.
    public var connections = EngineConfig.defaultConnections
    /// `--stall-timeout`: seconds under 1 byte/s that end an attempt as a `timeout`.
    public var stallTimeout = EngineConfig.defaultStallTimeout
    /// `--checkpoint-interval`: seconds between checkpoints while bytes flow.
    public var checkpointInterval = EngineConfig.defaultCheckpointInterval
    /// Mode for files the daemon creates for the user (0666 less the user's umask; the daemon
    /// itself runs with umask 077).
    public var fileMode: mode_t = 0o644
    /// Mode for directories created by `--create-dirs`.
    public var directoryMode: mode_t = 0o755
    /// The daemon's `--on-end` hook (run after a job's own), or nil.
    public var onEnd: String?

    /// The defaults.
    public init() {}
}

/// The transfer engine: the composition of the job state machine (``JobMachine``), the in-memory
/// queue (``Scheduler``), checkpoints (``Checkpointer``), destinations and the running attempts,
/// on top of the store (group commit) and one curl multi handle.
///
/// Every state change goes through ``dispatch(_:_:loaded:)``: the machine decides, the change is
/// written to the pending ``WriteBatch`` and applied to the in-memory facts, and the actions run.
/// At the end of each loop pass (and before every RPC answer) ``commit()`` writes the batch in
/// one transaction and only then sends the events. Loop-thread only.
public final class Engine: AttemptHost {
    let loop: EventLoop
    let store: JobStore
    let multi: CurlMulti
    let config: EngineConfig
    private(set) var checkpointer: Checkpointer
    let directorySyncer: DirectorySyncer
    /// Small finished downloads put in place in batches (one syncfs and one directory fsync each).
    let smallFileWriter: SmallFileWriter
    /// The daemon-wide bandwidth limits and their shared budgets.
    let bandwidth = BandwidthGovernor()
    private var lastScheduleCheck: UInt64 = 0
    // The engine's state below is internal only so that its extensions (Engine+*.swift, one file
    // a concern) can use it; nothing outside Engine reads or changes it.
    /// Every unfinished job's scheduling facts, the queue and the destinations held.
    var scheduler = Scheduler()
    /// The running transfers, by job id.
    var tasks: [Int64: TransferTask] = [:]
    /// Attempts of queued jobs standing by for a slot whose job is finishing (``Engine+Standby``).
    var standby: [Int64: TransferTask] = [:]
    /// The rows of jobs whose attempt is ending, while the ending is dispatched (``attemptEnded(_:_:)``).
    var ending: [Int64: JobRecord] = [:]
    /// The row changes of this loop pass, committed together (``commit()``).
    var batch = WriteBatch()
    /// Directories resolved for the requests prepared in this loop pass (``CanonicalPath``): a
    /// list's requests, and a batch's part prepared a request at a time, share their directories.
    /// Emptied at the pass's end (``commit()``), so a link changed later is seen.
    var resolvedThisPass: [String: String] = [:]
    /// Rows of jobs queued by a list sent in one message (up to
    /// ``EngineConfig/queuedRecordCacheLimit``), so starting them needs no read; kept current by
    /// ``write(_:_:loaded:)`` as the tasks' records are, dropped when started or deleted.
    var queuedRecords: [Int64: JobRecord] = [:]
    private var afterCommitQueue: [() -> Void] = []
    /// The notifications of this loop pass, sent after its commit.
    var events: [(EngineNotification, JobSnapshot)] = []
    private let tick: LoopTimer
    private let retryTimer: LoopTimer
    /// The `--on-end` hooks running now (``Engine+Hooks``).
    let hooks: HookRunner
    /// Hooks still owed to endings that jobs left (removed or retried), by their own id
    /// (``OwedHook``; stored in `owed_hook`).
    var owedHooks: [Int64: OwedHook] = [:]
    /// The id the next ``OwedHook`` gets (above every stored one: read at start).
    var nextOwedHookId: Int64 = 1
    private var endOfPass: LoopPrepare?
    private(set) var shuttingDown = false
    private var lastProgressEvent: [Int64: Int64] = [:]
    /// Bytes a download's last attempt left in its part (written, maybe not yet checkpointed), so
    /// a paused or waiting job never shows fewer bytes than it just did. Memory only: after a
    /// restart the part is cut back to its checkpoint anyway.
    var lastBytes: [Int64: Int64] = [:]
    /// `DELETE`s of abandoned resumable uploads in flight (``UploadTermination``), kept alive
    /// until libcurl is done with them.
    private var terminations: [ObjectIdentifier: CurlEasy] = [:]
    /// Receives state changes (after they are committed) and progress, with the job object: the
    /// notifications of one loop pass (or one tick) together, in order.
    public var onEvents: (([(EngineNotification, JobSnapshot)]) -> Void)?
    /// Whether anyone listens to events (job objects are built only then).
    public var wantsEvents: () -> Bool = { true }
    /// Whether the network is reachable (from the NetworkMonitor). Never stops a request.
    public private(set) var isReachable = true
    /// Jitter in -1...1 (replaceable for tests); nil draws from ``jitterSource``.
    var jitter: (() -> Double)?
    private var jitterSource = JitterSource()
    /// Wall clock for timestamps, monotonic clock for retry deadlines (replaceable for tests).
    var clock = EngineClock.system
    /// Jobs waiting for free space (`waitReason` `"disk"`).
    private(set) lazy var diskWatcher = DiskSpaceWatcher(
        loop: loop,
        stillWaiting: { [unowned self] id in
            guard let f = self.scheduler.facts[id] else { return false }
            return f.state == .waiting && f.waitReason == .disk
        },
        onFree: { [unowned self] id in
            Log.info("disk space is free again: starting", job: id)
            self.dispatch(id, .diskSpaceChanged)
            self.schedule()
        })
    /// While a control command performs the transitions it decided, no job is started: a slot
    /// freed by its first id must not start a job that a later id pauses or cancels.
    var holdScheduling = false
    /// Rows a control command deleted before acting: their files are still to be deleted.
    var vanishing: [Int64: JobRecord] = [:]
    /// Control commands waiting for a job whose file is being put in place, in the order they
    /// came (``control(_:ids:deleteFiles:answer:)``). Internal: the control extension runs them.
    var parkedControls: [ParkedControl] = []
    /// Jobs whose next attempt goes on new connections only (their last one failed on a kept-alive
    /// connection: ``TransferTask/failedOnReusedConnection``).
    private var freshConnectionNext: Set<Int64> = []
    /// What a job that just ran out of space waits for (set when its attempt ends).
    private var diskNeeds: [Int64: DiskSpaceWatcher.Need] = [:]
    /// A job's bytes when it last ran out of space, and how often in a row it did so without
    /// writing more (each time it is held back twice as long).
    private var diskStrikes: [Int64: (bytes: Int64, count: Int)] = [:]
    /// Since when (monotonic s) group commits fail; nil while the store writes.
    private var commitFailingSince: Double?
    /// Stops under way (an attempt's last checkpoint, its files closed), by job: how many.
    private var stopping: [Int64: Int] = [:]
    /// When (monotonic s) the end of a pass may try a failing commit again.
    private var nextCommitTry = 0.0
    /// Whether the reserve was given up (the home's disk filled) and not yet made again.
    private var onReserve = false
    /// Space set aside in the home, given up when the disk fills so bookkeeping can go on.
    private lazy var reserve = SpaceReserve(
        path: (storeDirectory as NSString).appendingPathComponent("aftransferd.reserve"))

    /// Creates the engine; call ``recover()`` then ``start()``.
    public init(loop: EventLoop, store: JobStore, config: EngineConfig) throws {
        // Before libuv's pool starts (on its first use): parallel fsyncs and hashing reads.
        setenv("UV_THREADPOOL_SIZE", String(EngineConfig.poolThreads), 0)
        self.loop = loop
        self.store = store
        self.config = config
        self.multi = try CurlMulti(loop: loop)
        multi.limitConnectionsPerHost(config.maxPerHost)
        self.tick = LoopTimer(loop: loop)
        self.retryTimer = LoopTimer(loop: loop)
        self.hooks = HookRunner(loop: loop)
        self.directorySyncer = DirectorySyncer(loop: loop)
        self.smallFileWriter = SmallFileWriter(loop: loop)
        // A placeholder until `self` can be captured; replaced on the next line.
        self.checkpointer = Checkpointer(interval: config.checkpointInterval) { _, _ in }
        self.checkpointer = Checkpointer(interval: config.checkpointInterval) { [unowned self] id, offset in
            self.recordDurable(id, offset)
        }
    }

    // MARK: - Life cycle

    /// Brings the store in line with the disk after a stop or a crash (part files cut back to
    /// their checkpoint, interrupted jobs queued again, finished renames recognized) and loads
    /// the in-memory queue.
    public func recover() throws {
        let now = Timestamp.now()
        if !reserve.acquire() {
            Log.info(
                reserve.overFileSizeLimit
                    ? "the file-size limit (ulimit -f) leaves no room for the reserve \(reserve.path): no job can be added"
                    : "no room for the reserve \(reserve.path) yet")
        }
        var counts = try store.counts()
        for s in TransferState.allCases where Scheduler.tracks(s) { counts[s] = 0 }
        scheduler = Scheduler(untrackedCounts: counts)
        // Hooks owed to endings jobs left: known before any command can leave another.
        for kept in try store.owedHooks() {
            owedHooks[kept.id] = kept
            nextOwedHookId = max(nextOwedHookId, kept.id + 1)
        }
        var recovered: [JobFacts] = []
        // Downloads a crash interrupted after their file was in place: their open attempt moved
        // the whole file.
        var completedAttempts: [Int64: Int64] = [:]
        for f in try store.schedulingFacts() {
            var facts = f
            var p = JobPatch()
            var fileInPlace = false
            if f.kind == .download, let dest = f.destination, f.attempts > 0 || f.finalizing {
                let part = Destination.partPath(dest)
                var st = stat()
                // lstat: a link or a FIFO at the part's name is not the part (never cut through;
                // the next attempt refuses to open it).
                let partExists = lstat(part, &st) == 0 && (st.st_mode & S_IFMT) == S_IFREG
                if f.finalizing && !partExists, let r = try store.job(f.id),
                    Destination.holdsFinishedDownload(dest, size: r.total, sha256: r.sha256)
                {
                    // Crashed between the rename and the row update: the file is in place (a small
                    // one's bytes were synced just before its rename, in the same work item).
                    fileInPlace = true
                    if let total = r.total {
                        p.durableBytes = total
                        completedAttempts[f.id] = total
                    }
                    Log.info("recovered: completed \(dest)", job: f.id)
                } else if partExists && f.segmented {
                    // Ranges of a segmented download: each resumes from its own durable offset
                    // (bytes past one are written again), so the part is not cut back.
                } else if partExists {
                    let size = Int64(st.st_size)
                    if size > f.durableBytes {
                        if truncate(part, off_t(f.durableBytes)) != 0 {
                            Log.info(
                                "cannot cut \(part) back to its checkpoint: \(String(cString: strerror(errno)))",
                                job: f.id)
                        }
                    } else if size < f.durableBytes {
                        p.durableBytes = size
                    }
                } else if f.durableBytes > 0 {
                    p.durableBytes = 0
                }
            }
            var event = JobEvent.recovered(fileInPlace: fileInPlace)
            // The facts first, so that only such uploads cost a read of their row.
            if f.kind == .upload, f.state == .running, f.retryLimit == 0, try store.job(f.id)?.sentAtMostOnce == true {
                // Its request may have reached the server whole before the daemon went away.
                event = .attemptEnded(.failed(Self.interruptedOnce, retryAfter: nil))
                Log.info("not sent again (--retries 0): its request was under way when the daemon went away", job: f.id)
                // As a failure that the daemon saw: an empty response part is not kept.
                if let response = f.responseFile { PartFile.remove(Destination.partPath(response), onlyEmpty: true) }
            }
            if case .success(let t) = JobMachine.transition(
                event, f, MachineContext(now: now, daemonHook: config.onEnd != nil))
            {
                p.merge(t.patch)
            }
            if !p.isEmpty {
                batch.patch(f.id, p)
                facts.apply(p)
            }
            recovered.append(facts)
        }
        bandwidth.set(try store.limits(), now: loop.nowMillis)
        for f in recovered { scheduler.add(f) }
        try deleteDoomedParts()
        do {
            try store.closeOpenAttempts(fallback: now, completed: completedAttempts)
            try store.commit(batch, now: now)
            batch = WriteBatch()
        } catch  where JobStore.isDiskFull(error) {
            // The home is full: start all the same; the changes stay pending until it is not.
            Log.info("cannot write the job database \(store.path): its disk is full; retrying")
            commitFailingSince = clock.monotonic()
        }
    }

    /// Starts the periodic tick, the end-of-pass commit and the scheduler; arms the timers of
    /// waiting jobs.
    public func start() {
        endOfPass = LoopPrepare(loop: loop) { [unowned self] in
            self.commitOrLog()
            if !self.parkedControls.isEmpty { self.runParkedControls() }
        }
        tick.start(after: 250, repeating: 250) { [unowned self] in self.onTick() }
        for id in scheduler.facts.keys.sorted() {
            guard let f = scheduler.facts[id], f.state == .waiting else { continue }
            switch f.waitReason {
            case .offline?:
                if isReachable { dispatch(id, .networkReturned) }
            case .disk?:
                if let r = record(id) { diskWatcher.watch(id, diskNeed(r, bytes: r.durableBytes, total: r.total)) }
            default:
                scheduler.arm(id, at: clock.monotonicDeadline(wallAt: f.nextRetryAt ?? clock.wall()))
            }
        }
        rearmRetryTimer()
        schedule()
        if commitFailingSince != nil {
            // Recovery's changes wait for room in the home: the endings it recorded (and their
            // hooks) are read once they are written.
            afterCommit { [unowned self] in self.runPendingHooks() }
        } else {
            runPendingHooks()
        }
    }

    /// The error of a `--retries 0` upload whose request was under way when the daemon stopped or
    /// crashed: it is not sent again (the server may have had all of it).
    static let interruptedOnce = TransferError(
        .network,
        "the daemon stopped while this upload's request was under way; with --retries 0 it is not sent again "
            + "(aftransfer retry sends it again)",
        retryable: false)

    /// Stops every transfer with a synchronous checkpoint, queues them for the next start and
    /// commits. A job whose file is being put in place is left `running`, as a crash leaves it:
    /// its file may go into place on the pool as the daemon exits, and the next start completes
    /// it if its file is there (checked by its digest) or queues it again (``recover()``). So is
    /// a `--retries 0` upload whose whole body was sent: the next start fails it rather than send
    /// it again (``interruptedOnce``); one cut mid-body runs again (the server saw no whole request).
    public func shutdown() {
        shuttingDown = true
        dropAllStandby()
        for parked in parkedControls { parked.answer(.failure(EngineStopping())) }
        parkedControls = []
        tick.close()
        retryTimer.close()
        diskWatcher.close()
        for (id, task) in tasks.sorted(by: { $0.key < $1.key }) {
            let finishing = task.phase == .finishing
            // Its whole body was sent: the server may have acted on it (``JobRecord/sentAtMostOnce``).
            let sentOnce = task.record.sentAtMostOnce && task.bytes >= (task.total ?? .max)
            task.halt()
            tasks[id] = nil
            closeHistory(task, error: nil)
            if finishing {
                Log.info("stopped while its file is put in place: the next start completes or queues it", job: id)
                continue
            }
            if sentOnce {
                Log.info("stopped after its whole request was sent: the next start fails it (--retries 0)", job: id)
                continue
            }
            task.checkpointNow()
            dispatch(id, .requeue(.shutdown))
            Log.info("checkpointed at \(task.bytes) bytes for shutdown", job: id)
        }
        // Hooks that run are ended and recorded as ended by the stop (``HookRunner/stopAll()``).
        hooks.stopAll()
        commitOrLog()
        endOfPass?.close()
        endOfPass = nil
        multi.close()
    }

    // MARK: - Group commit

    /// Writes the changes of this loop pass in one transaction, then runs what waited for it
    /// (renames) and sends the events. A failed commit keeps the changes for the next try.
    public func commit() throws {
        if !resolvedThisPass.isEmpty { resolvedThisPass = [:] }
        if !batch.isEmpty {
            try store.commit(batch, now: Timestamp.now())
            batch = WriteBatch()
        }
        let waiting = afterCommitQueue
        afterCommitQueue = []
        // The small files this commit lets go are put in place together (not the first alone).
        smallFileWriter.gathering { for body in waiting { body() } }
        // The log's lines of this pass before its events: whoever reads an event finds them.
        Log.flush()
        let ready = events
        events = []
        if !ready.isEmpty { onEvents?(ready) }
    }

    /// ``commit()`` at the end of a loop pass. A failure (the home's disk full) keeps the changes
    /// pending, is logged once, and is tried again every ``EngineConfig/commitRetryInterval``,
    /// not on every pass; transfers go on meanwhile.
    func commitOrLog() {
        defer { Log.flush() }
        let now = clock.monotonic()
        if commitFailingSince != nil && now < nextCommitTry { return }
        do {
            do {
                try commit()
            } catch  where JobStore.isDiskFull(error) && reserve.release() {
                Log.info("the disk of the job database is full: using the reserve \(reserve.path)")
                onReserve = true
                try commit()
            } catch  where JobStore.isDiskFull(error) && onReserve {
                // The log's own growth may be what filled the reserve: cut it, then try again.
                try? store.truncateWAL()
                try commit()
            }
            if onReserve {
                // On the reserve, the log is cut after every commit: what the reserve holds goes to
                // the rows, not to a log that grows by every commit (SPEC: transfers go on).
                try? store.truncateWAL()
            }
            if let since = commitFailingSince {
                Log.info("the job database is written again (after \(Int(now - since)) s)")
                commitFailingSince = nil
            }
        } catch {
            if commitFailingSince == nil {
                Log.info("cannot write the job database \(store.path): \(error); changes kept, retrying")
                commitFailingSince = now
            }
            nextCommitTry = now + EngineConfig.commitRetryInterval
        }
    }

    /// Before a request adds or changes jobs: refuses it while the home's disk is (nearly) full,
    /// and commits what is pending, so that the request's own write starts from a clean slate.
    /// - Throws: `disk_full` naming the disk; nothing is changed then.
    func ensureStoreWritable() throws {
        if !reserve.isHeld {
            // Spent on a full disk: new work waits until the reserve is back and room is left.
            let free = DiskSpace.available(at: storeDirectory) ?? .max  // unknown: the reserve decides
            guard restoreReserve(free: free) else {
                if reserve.overFileSizeLimit {
                    throw TransferError(
                        .io,
                        "the daemon's file-size limit (ulimit -f) is below the \(DiskSpace.describe(reserve.size)) "
                            + "reserve it keeps beside the job database (\(reserve.path)): nothing was added or changed; "
                            + "start aftransferd with a higher limit", retryable: false)
                }
                throw homeFull(free: free)
            }
        } else if let free = DiskSpace.available(at: storeDirectory), free < config.homeReserve {
            throw homeFull(free: free)
        }
        do { try commit() } catch { throw storeFailure(error) }
    }

    /// The job database's directory (the home).
    private var storeDirectory: String { (store.path as NSString).deletingLastPathComponent }

    /// Makes the reserve again when the home, with `free` bytes available, has room for it and the
    /// margin (the room checked covers both: no second look is needed). Returns whether it is held.
    @discardableResult
    private func restoreReserve(free: Int64) -> Bool {
        guard free >= reserve.size + config.homeReserve, reserve.acquire() else { return false }
        onReserve = false
        Log.info("the disk of the job database has room again: reserve \(reserve.path) restored")
        return true
    }

    /// The refusal of a request while the job database cannot be written for want of space.
    private func homeFull(free: Int64?) -> TransferError {
        let left = free.map { " (\(DiskSpace.describe($0)) free)" } ?? ""
        return TransferError(
            .diskFull,
            "the disk holding the job database \(storeDirectory) is full\(left): nothing was added or changed; "
                + "free some space and try again",
            retryable: true)
    }

    /// A store error as a request's error: `disk_full` for a full disk, else as it is.
    func storeFailure(_ error: Error) -> Error {
        JobStore.isDiskFull(error) ? homeFull(free: nil) : error
    }

    /// Runs `body` once the changes made so far are committed.
    func afterCommit(_ body: @escaping () -> Void) { afterCommitQueue.append(body) }

    /// Records a hook owed to an ending a job left (memory, and this pass's batch).
    func keepOwedHook(_ h: OwedHook) {
        owedHooks[h.id] = h
        batch.putOwedHook(h)
    }

    /// Forgets an owed hook (by its own id): its ending's last hook finished (memory, and this
    /// pass's batch).
    func finishOwedHook(_ id: Int64) {
        owedHooks[id] = nil
        batch.finishOwedHook(id)
    }

    /// Changes a job's row: into the pending batch, the running attempt's record and the facts,
    /// with `updatedAt` at `at` (now when nil). `committed`: a commit wrote `patch` already (a
    /// control command's, at `at`), so only the copies in memory change.
    func write(_ id: Int64, _ patch: JobPatch, loaded: JobFacts? = nil, at: Double? = nil, committed: Bool = false) {
        guard !patch.isEmpty else { return }
        // Each copy held in memory changes as the row will, `updatedAt` too: the same instant.
        let now = at ?? Timestamp.now()
        if !committed { batch.patch(id, patch, at: now) }
        tasks[id]?.record.apply(patch, at: now)
        ending[id]?.apply(patch, at: now)
        vanishing[id]?.apply(patch, at: now)  // a job being removed: what its later actions read
        queuedRecords[id]?.apply(patch, at: now)
        scheduler.apply(patch, to: id, loaded: loaded)
    }

    func write(_ job: Int64, _ patch: JobPatch) { write(job, patch, loaded: nil) }

    private func recordDurable(_ id: Int64, _ offset: Int64) {
        var p = JobPatch()
        p.durableBytes = offset
        writeCheckpoint(id, p)
        recordAttemptBytes(id, offset)
    }

    /// Writes a checkpoint's durable offsets. A stopped attempt's last checkpoint (after a pause,
    /// a failure) changes nothing its job object shows (its bytes are the attempt's last count,
    /// ``lastBytes``): the row keeps the `updatedAt` its change of state gave it, which the
    /// command's answer and the event told.
    func writeCheckpoint(_ id: Int64, _ patch: JobPatch) {
        if tasks[id] == nil, let changed = record(id)?.updatedAt {
            write(id, patch, at: changed)
        } else {
            write(id, patch)
        }
    }

    /// Keeps the open attempt's byte count at the job's durable bytes (a checkpoint's, of one
    /// stream or of every range), and its status at the response's, so a crash leaves a true
    /// history.
    func recordAttemptBytes(_ id: Int64, _ durable: Int64) {
        if let task = tasks[id], task.historyEntry.endedAt == nil {
            task.historyEntry.bytes = durable
            if let status = task.responseStatus { task.historyEntry.httpStatus = status }
            batch.putAttempt(id, seq: task.historySeq, task.historyEntry)
        }
    }

    // MARK: - The state machine

    /// Applies an event to a job through ``JobMachine`` and performs its actions.
    /// `loaded` are the facts of a job the scheduler does not track (completed, cancelled).
    @discardableResult
    func dispatch(_ id: Int64, _ event: JobEvent, loaded: JobFacts? = nil) -> Result<JobTransition, JobRefusal>? {
        guard let facts = scheduler.facts[id] ?? loaded else { return nil }
        let result = decide(id, event, facts)
        guard case .success(let t) = result else { return result }
        perform(id, t, facts: facts)
        return result
    }

    /// Whether a failed range of a running segmented download may be asked for again, spending one
    /// of the job's retries (``JobEvent/rangeFailed(_:)``).
    func spendRetryOnRange(_ id: Int64, _ failure: TransferError) -> Bool {
        guard case .success? = dispatch(id, .rangeFailed(failure)) else { return false }
        return true
    }

    /// A jitter sample in -1...1 for a retry delay (``jitter`` when a test set it).
    func retryJitter() -> Double {
        jitter?() ?? jitterSource.sample()
    }

    /// What ``JobMachine`` makes of `event` for a job with `facts`, now. No change is made.
    /// `claimed`: paths that jobs retried earlier in the same command take (they hold them once
    /// their transitions are performed, after every decision of the command).
    func decide(
        _ id: Int64, _ event: JobEvent, _ facts: JobFacts, claimed: [String: Int64] = [:]
    ) -> Result<JobTransition, JobRefusal> {
        let ctx = MachineContext(
            now: clock.wall(), isReachable: isReachable, jitter: retryJitter(),
            attemptFinishing: tasks[id]?.holdsCommands == true, daemonHook: config.onEnd != nil,
            pathHolder: event == .retry
                ? facts.heldPath.flatMap { scheduler.holder(of: $0, except: id) ?? claimed[$0] } : nil)
        return JobMachine.transition(event, facts, ctx)
    }

    /// Writes a decided transition (pending batch and memory) and performs its actions. `owed`
    /// are the records of its `keepHook` actions when they were made (and written) already;
    /// `committedAt` the time of the commit that wrote its patch already (see ``write(_:_:loaded:at:committed:)``).
    func perform(
        _ id: Int64, _ t: JobTransition, facts: JobFacts, owed made: [OwedHook]? = nil, committedAt: Double? = nil
    ) {
        // Any change but its start gives up the job's standby (its start takes it over).
        if !t.actions.contains(.startAttempt) { dropStandby(id) }
        // An owed hook keeps the job as the ending it leaves left it: taken before the patch.
        var owed = made ?? owedHooks(for: id, t)
        write(
            id, t.patch, loaded: scheduler.facts[id] == nil ? facts : nil, at: committedAt,
            committed: committedAt != nil)
        logChange(id, from: facts.state, t)
        var runScheduler = false
        var launches = false
        for action in t.actions {
            switch action {
            case .startAttempt: launches = openAttempt(id)
            case .stopAttempt(let reason): stopAttempt(id, reason)
            case .armRetryTimer(let at):
                // The deadline runs on the monotonic clock: a wall-clock jump moves nothing.
                scheduler.arm(id, at: clock.monotonicDeadline(wallAt: at))
                rearmRetryTimer()
            case .cancelRetryTimer: scheduler.disarm(id)
            case .watchDiskSpace:
                if let need = diskNeeds.removeValue(forKey: id) {
                    diskWatcher.watch(id, need)
                } else if let r = record(id) {
                    diskWatcher.watch(id, diskNeed(r, bytes: lastBytes[id] ?? r.durableBytes, total: r.total))
                }
            case .deletePart: deletePart(id)
            case .deleteFile: deleteFile(id)
            case .keepHook(_, let end):
                guard !owed.isEmpty else { break }
                let kept = owed.removeFirst()
                keepOwedHook(kept)
                // The hook running (or waiting) for the ending being left goes on as the record's,
                // not started twice; otherwise it starts once the change is committed, as a new
                // ending's (a running job removed is cancelled first) does.
                if end != nil || !hooks.adopt(.job(id), by: .owed(kept.id)) {
                    afterCommit { [unowned self] in self.runOwedHook(kept.id) }
                }
            case .notifyRemoved(let end):
                // The ending happens now, with the removal (its attempt stopped, its history
                // closed just before), into the record kept of the job: its last object, the
                // event's, the removal's and the command's answer, is as of this instant.
                vanishing[id]?.apply(end, at: Timestamp.now())
                if onEvents != nil, wantsEvents(), let job = snapshot(id) {
                    events.append((EngineNotification.stateChanged, job))
                }
            case .deleteRow:
                // Every removal is told, not only a running job's (whose ending came just before).
                if onEvents != nil, wantsEvents(), let job = snapshot(id) {
                    events.append((EngineNotification.removed, job))
                }
                batch.delete(id)
                queuedRecords[id] = nil
                scheduler.remove(id, state: facts.state)
                checkpointer.forget(id)
                lastBytes[id] = nil
                freshConnectionNext.remove(id)
                diskStrikes[id] = nil
            case .notify: notify(id)
            case .schedule: runScheduler = true
            case .runHook: afterCommit { [unowned self] in self.runHook(id) }
            }
        }
        // After the transition's event: an attempt that fails as it starts tells its failure
        // after its `running`, not instead of it.
        if launches { launchAttempt(id) }
        if runScheduler { schedule() }
    }

    /// One log line for a change of state that no other line tells (SPEC: one line an event, with
    /// the job id): a start, an attempt's end and a completion have theirs already.
    private func logChange(_ id: Int64, from: TransferState, _ t: JobTransition) {
        if t.actions.contains(.deleteRow) {
            Log.info("removed", job: id)
            return
        }
        guard let to = t.patch.state, to != from else { return }
        switch to {
        case .paused, .cancelled:
            Log.info(to.rawValue, job: id)
        case .queued:
            Log.info("queued again (was \(from.rawValue))", job: id)
        case .waiting:
            let reason = (t.patch.waitReason ?? nil)?.rawValue ?? "retry"
            let at = (t.patch.nextRetryAt ?? nil).map { " until \(Timestamp.rfc3339($0))" } ?? ""
            Log.info("waiting (\(reason))\(at)", job: id)
        case .failed:
            let error = (t.patch.error ?? nil).map { ": \($0.code.rawValue): \($0.message)" } ?? ""
            Log.info("failed\(error)", job: id)
        case .running, .completed:
            break
        }
    }

    private func notify(_ id: Int64) {
        guard onEvents != nil, wantsEvents(), let job = snapshot(id) else { return }
        events.append((EngineNotification.stateChanged, job))
    }

    // MARK: - Scheduling

    /// Starts queued jobs while slots are free: highest priority first, then oldest.
    func schedule() {
        guard !shuttingDown, !holdScheduling else { return }
        while tasks.count < config.maxActive, let id = takeNext() {
            // A queued job always starts; were one refused, its standby would be offered again.
            if case .success? = dispatch(id, .start) { continue }
            standby.removeValue(forKey: id)?.halt()
        }
        standBy()
    }

    /// Opens a starting job's attempt: its task (a standby's, or a new one) and its history entry.
    /// False when the job has no row. ``launchAttempt(_:)`` starts it.
    private func openAttempt(_ id: Int64) -> Bool {
        guard let r = record(id) else { return false }  // pending changes applied (``record(_:)``)
        queuedRecords[id] = nil
        lastBytes[id] = nil
        let standing = standby.removeValue(forKey: id)
        standing?.record = r
        let task: TransferTask =
            standing
            ?? (r.kind == .upload ? UploadTask(engine: self, record: r) : DownloadTask(engine: self, record: r))
        tasks[id] = task
        task.freshConnection = freshConnectionNext.remove(id) != nil
        task.historySeq = r.history.count
        // A standby's attempt starts too when its job does (its request went out before).
        task.historyEntry = AttemptRecord(
            attempt: r.attempts, startedAt: Timestamp.rfc3339(Timestamp.now()), bytes: r.durableBytes)
        batch.putAttempt(id, seq: task.historySeq, task.historyEntry)
        if r.kind == .upload, let resumeAt = r.uploadUrl {
            Log.info("attempt \(r.attempts): resuming the upload at \(URLRedaction.redact(resumeAt))", job: id)
        } else {
            Log.info("attempt \(r.attempts): \(r.firstMethod) \(URLRedaction.redact(r.url))", job: id)
        }
        return true
    }

    /// Starts an opened attempt (``openAttempt(_:)``): a standby's held response goes on.
    private func launchAttempt(_ id: Int64) {
        guard let task = tasks[id] else { return }
        if task.standingBy {
            task.goOn()
            return
        }
        guard task.phase == .preparing else { return }
        do {
            try task.start()
        } catch {
            let err = TransferError.from(error, retryable: false)
            task.complete(failure: err)
        }
    }

    /// Stops a running attempt (its job already changed state).
    private func stopAttempt(_ id: Int64, _ reason: StopReason) {
        guard let task = tasks.removeValue(forKey: id) else { return }
        task.halt()
        lastProgressEvent[id] = nil
        if task is DownloadTask && reason != .cancel { lastBytes[id] = task.bytes }
        if task is UploadTask && reason == .cancel { terminateUpload(id, task.record) }
        closeHistory(task, error: reason == .cancel ? JobMachine.cancelledError : nil)
        stopping[id, default: 0] += 1
        task.stopped(reason) { [weak self] in
            guard let self else { return }
            if let n = self.stopping[id], n > 1 { self.stopping[id] = n - 1 } else { self.stopping[id] = nil }
            self.schedule()
        }
    }

    func isStopping(_ job: Int64) -> Bool { stopping[job] != nil }

    /// Records the end of an attempt and moves the job on (``AttemptHost``).
    func attemptEnded(_ task: TransferTask, _ outcome: AttemptOutcome) {
        let id = task.jobId
        guard tasks[id] === task else { return }  // already stopped by the user
        tasks[id] = nil
        lastProgressEvent[id] = nil
        // While the ending is dispatched, the job's row is the task's: its events are made from it
        // rather than read back from the store (a read per finished job was a tenth of the
        // daemon's work with thousands of small files).
        ending[id] = task.record
        defer { ending[id] = nil }
        switch outcome {
        case .completed(let digest):
            diskStrikes[id] = nil
            closeHistory(task, error: nil)
            dispatch(id, .attemptEnded(.completed(sha256: digest, bytes: task.bytes)))
            Log.info("completed: \(task.bytes) bytes, sha256 \(digest)", job: id)
        case .failed(var err, let retryAfter, let retrySpent):
            if task is DownloadTask, err.code != .checksum { lastBytes[id] = task.bytes }
            if task.failedOnReusedConnection { freshConnectionNext.insert(id) }
            if err.code == .diskFull, scheduler.facts[id].map(JobMachine.waitsForDisk) ?? true {
                // `status` says what the job waits for (SPEC "Disk full").
                var need = diskNeed(
                    task.record, bytes: task.bytes, total: task.total ?? task.record.total,
                    responseLength: task.announcedLength)
                let strikes = diskStrikes[id].map { $0.bytes >= task.bytes ? $0.count + 1 : 0 } ?? 0
                diskStrikes[id] = (task.bytes, strikes)
                if strikes > 0 {
                    let base = Double(DiskSpaceWatcher.defaultInterval) / 1000
                    let holdOff = min(DiskSpaceWatcher.maxHoldOff, base * pow(2, Double(strikes)))
                    need.notBefore = clock.monotonic() + holdOff
                }
                diskNeeds[id] = need
                err.message = "waiting for \(need.text) free on \(need.path): \(err.message)"
            }
            closeHistory(task, error: err)
            dispatch(id, .attemptEnded(.failed(err, retryAfter: retryAfter, retrySpent: retrySpent)))
            Log.info("attempt ended: \(err.code.rawValue): \(err.message)", job: id)
        }
    }

    /// Writes a task's current history entry (``AttemptHost``).
    func recordHistory(_ task: TransferTask) {
        batch.putAttempt(task.jobId, seq: task.historySeq, task.historyEntry)
    }

    private func closeHistory(_ task: TransferTask, error: TransferError?) {
        task.closeHistory(error: error)
        batch.putAttempt(task.jobId, seq: task.historySeq, task.historyEntry)
        // The copies events and hooks are made from (a job ending, a job being removed) see it.
        let id = task.jobId
        ending[id]?.putHistory(task.historyEntry, at: task.historySeq)
        vanishing[id]?.putHistory(task.historyEntry, at: task.historySeq)
        // The attempt's last response: an earlier request's when the last one got none (a
        // resumable upload whose source was found changed before its next append).
        if let status = task.attemptStatus {
            var p = JobPatch()
            p.httpStatus = .some(status)
            write(task.jobId, p)
        }
    }

    // MARK: - Timers and the tick

    /// How often (ms) the bandwidth schedule is looked at.
    static let scheduleCheckInterval: UInt64 = 1000

    private func rearmRetryTimer() {
        guard !shuttingDown, let next = scheduler.nextDeadline() else {
            retryTimer.stop()
            return
        }
        let wait = (next - clock.monotonic()) * 1000
        let ms = wait.isFinite ? UInt64(min(max(0, wait), 1e12)) : 0
        retryTimer.start(after: ms) { [unowned self] in
            for id in self.scheduler.takeDue(now: self.clock.monotonic()) { self.dispatch(id, .retryDue) }
            self.rearmRetryTimer()
            self.schedule()
        }
    }

    private func onTick() {
        let now = loop.nowMillis
        if now &- lastScheduleCheck >= Self.scheduleCheckInterval {
            lastScheduleCheck = now
            if bandwidth.refresh(now: now) { limitsChanged() }
            // Living on the reserve cuts the log after every commit: back to normal commits as
            // soon as the home has room, not only at the next request that changes a job.
            if onReserve { restoreReserve(free: DiskSpace.available(at: storeDirectory) ?? .max) }
        }
        // Stalls: under 1 byte/s for the stall window ends the attempt (``TransferTask/stalled``;
        // libcurl's low-speed check averages over several seconds and fires late).
        let window = UInt64(config.stallTimeout * 1000)
        for (_, t) in tasks where t.phase == .transferring && t.stalled(now: now, window: window) {
            let secs = Int(config.stallTimeout)
            t.complete(failure: TransferError(.timeout, "stalled: under 1 byte/s for \(secs) s", retryable: true))
        }
        for (_, t) in tasks { t.rate.sample(bytes: t.bytes, now: now) }
        // Segmented downloads take host connections other jobs freed.
        for (_, t) in tasks where t.phase == .transferring { (t as? DownloadTask)?.rebalance() }
        if onEvents != nil, wantsEvents() {
            var progress: [(EngineNotification, JobSnapshot)] = []
            for (id, t) in tasks where lastProgressEvent[id] != t.bytes {
                lastProgressEvent[id] = t.bytes
                progress.append((EngineNotification.progress, JobSnapshot(JobListing(t.record), live: live(t))))
            }
            if !progress.isEmpty { onEvents?(progress) }
        }
        if checkpointer.roundDue(now: now) {
            for (_, t) in tasks where t.phase == .transferring {
                if let d = t as? DownloadTask, d.bytes != d.checkpointRequestedAt { d.checkpoint() }
            }
        }
    }

    // MARK: - Disk full

    /// What a job that ran out of space waits for: the rest of its known size on the file
    /// system of its part (or of an upload's response file), else more than 1 MiB.
    /// `responseLength` is the length the attempt's last response announced (an upload's).
    private func diskNeed(
        _ r: JobRecord, bytes: Int64, total: Int64?, responseLength: Int64? = nil
    ) -> DiskSpaceWatcher.Need {
        let file = r.kind == .download ? r.destination.map(Destination.partPath) : r.request.response
        let dir = file.map { ($0 as NSString).deletingLastPathComponent } ?? r.request.directory ?? "/"
        if r.kind == .download, let total, total > bytes {
            return DiskSpaceWatcher.Need(path: dir, bytes: total - bytes, sizeKnown: true)
        }
        if r.kind == .upload, let responseLength, responseLength > 0 {
            // The response file is written again whole by the next attempt (which sends the body
            // again): it waits for all of it, not for the 1 MiB of an unknown size.
            return DiskSpaceWatcher.Need(path: dir, bytes: responseLength, sizeKnown: true)
        }
        return DiskSpaceWatcher.Need(path: dir, bytes: DiskSpaceWatcher.unknownSizeNeed, sizeKnown: false)
    }

    // MARK: - Files

    private func deletePart(_ id: Int64) {
        lastBytes[id] = nil
        guard let r = record(id) else { return }
        if r.kind == .upload {
            terminateUpload(id, r)
        } else if r.destination != nil {
            write(id, checkpointer.discard(id))
        }
        // A download's part, or an upload's response file being written when it stopped.
        if let part = part(of: r) {
            PartFile.remove(part.path)
            batch.partDeleted(part.path)
        }
    }

    /// A part file is gone (``AttemptHost``): its ``DoomedPart`` record goes with this pass.
    func partDeleted(_ path: String) { batch.partDeleted(path) }

    /// The part file a job may have on disk: a download's part, an upload's response part; nil
    /// when another job holds its path now (a cancelled job, or a failed one with nothing to
    /// resume, gave it up): the part there is that job's.
    func part(of r: JobRecord) -> DoomedPart? {
        guard let path = r.heldPath, scheduler.holder(of: path, except: r.id) == nil else { return nil }
        return DoomedPart(path: Destination.partPath(path), destination: path)
    }

    /// Deletes the parts a cancel or a remove recorded and a crash left (``DoomedPart``), but for
    /// one whose destination an unfinished job holds again: that job's part now. Run at start,
    /// once the scheduler knows the destinations held.
    private func deleteDoomedParts() throws {
        for part in try store.doomedParts() {
            if scheduler.holder(of: part.destination) == nil, PartFile.remove(part.path) {
                Log.info("deleted \(part.path), left by a cancel or a remove the daemon stopped in")
            }
            batch.partDeleted(part.path)
        }
    }

    /// Sends `DELETE` to an abandoned resumable upload's URL once (best effort) and forgets the
    /// URL, so a later `retry` starts a new upload.
    private func terminateUpload(_ id: Int64, _ r: JobRecord) {
        guard let options = UploadTermination.options(for: r) else { return }
        var p = JobPatch()
        p.uploadUrl = .some(nil)
        p.durableBytes = 0
        write(id, p)
        guard let e = try? CurlEasy() else { return }
        e.onDone = { [unowned self, unowned e] _ in self.terminations[ObjectIdentifier(e)] = nil }
        e.configure(options)
        if multi.add(e) {
            terminations[ObjectIdentifier(e)] = e
            Log.info("DELETE \(URLRedaction.redact(options.url)) (upload abandoned)", job: id)
        }
    }

    /// Deletes a completed download's file (`remove --delete-files`): the download's own file
    /// only. One another job holds now, or that is not the download's any more (another size, or
    /// written after the download completed: a newer job's `--replace`, an edit), is kept.
    private func deleteFile(_ id: Int64) {
        guard let r = record(id), r.kind == .download, r.state == .completed, let dest = r.destination else { return }
        var st = stat()
        guard lstat(dest, &st) == 0 else { return }
        let modified = Double(st.st_mtim.tv_sec) + Double(st.st_mtim.tv_nsec) / 1e9
        // Its own: a regular file of its size, last written while the job ran — after it was
        // queued (a second's slack for the stored time's rounding; an older file of the same size
        // put there, such as a restored backup, is kept) and not after it completed.
        let own =
            scheduler.holder(of: dest, except: id) == nil && (st.st_mode & S_IFMT) == S_IFREG
            && Int64(st.st_size) == r.durableBytes && modified >= r.createdAt - 1
            && r.completedAt.map { modified <= $0 } ?? true
        guard own else {
            Log.info("kept \(dest): it is not this download's file any more", job: id)
            return
        }
        unlink(dest)
    }

    /// Connections the running attempts hold to `host` (``AttemptHost``).
    func connections(toHost host: String) -> Int {
        tasks.values.reduce(0) { $0 + ($1.hostKey == host ? $1.hostConnections : 0) }
    }

    /// The job holding a download destination (``AttemptHost``).
    func holder(of destination: String, except: Int64) -> Int64? {
        scheduler.holder(of: destination, except: except)
    }

    // MARK: - Network

    /// Reacts to reachability: on return, waiting-offline jobs start and silent transfers restart.
    public func setReachable(_ reachable: Bool) {
        let was = isReachable
        isReachable = reachable
        Log.info("network \(reachable ? "reachable" : "unreachable")")
        guard reachable, !was, !shuttingDown else { return }
        for id in scheduler.waiting(.offline) { dispatch(id, .networkReturned) }
        let now = loop.nowMillis
        for (id, t) in tasks.sorted(by: { $0.key < $1.key })
        where t.phase == .transferring && now - t.lastProgressAt > 5000 {
            Log.info("network returned: restarting a silent transfer", job: id)
            dispatch(id, .requeue(.restart))
        }
        schedule()
    }

    // MARK: - Bandwidth

    /// The daemon-wide limits in force now (`daemon.limits`, `daemon status`).
    public func currentLimits() -> LimitsInForce { bandwidth.inForce }

    /// Changes the daemon-wide limits (values as the `limit` options take them; nil leaves one
    /// as it is), stores them and applies them to running transfers at once.
    /// - Throws: `TransferError` `invalid_request` for a malformed rate or schedule (nothing
    ///   changes); `disk_full` naming the disk when the home is full, as for any change, or
    ///   another store error if they cannot be written (nothing changes either).
    public func setLimits(download: String?, upload: String?, schedule: String?) throws -> LimitsInForce {
        let next = try bandwidth.limits.changed(download: download, upload: upload, schedule: schedule)
        if next != bandwidth.limits {
            try ensureStoreWritable()
            do { try store.saveLimits(next) } catch { throw storeFailure(error) }
            bandwidth.set(next, now: loop.nowMillis)
            limitsChanged()
            let f = bandwidth.inForce
            Log.info(
                "limits: download \(f.download.map(String.init) ?? "off"), upload \(f.upload.map(String.init) ?? "off"), schedule \(f.schedule ?? "none")"
            )
        }
        return bandwidth.inForce
    }

    /// Number of jobs in each state (every state present), from memory.
    public func counts() -> [TransferState: Int] { scheduler.counts }

    /// Transfers running now (`daemon.status` `active`).
    public var activeTransfers: Int { tasks.count }

    /// New limits are in force: every transfer held back asks its budget again now, rather than
    /// at the time worked out at the old rate (16 KiB at 300 B/s is almost a minute); and under a
    /// download limit no queued download stands by (``standBy()``): their requests are dropped.
    private func limitsChanged() {
        for t in tasks.values where t.isHeldByLimit { t.wakeFromLimit() }
        if downloadLimitInForce { dropAllStandby() }
    }

    /// Bytes per second of all running transfers together (`daemon.status` `rate`).
    public var totalRate: Double {
        var down = 0.0
        var up = 0.0
        for t in tasks.values {
            if t.isUpload { up += shownRate(t) } else { down += shownRate(t) }
        }
        // Several transfers under one daemon-wide limit never show more than it together.
        if let limit = bandwidth.download.rate { down = min(down, Double(limit)) }
        if let limit = bandwidth.upload.rate { up = min(up, Double(limit)) }
        return down + up
    }
}
