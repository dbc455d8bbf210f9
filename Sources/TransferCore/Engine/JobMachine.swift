import Foundation

/// What happened to a job: the input of ``JobMachine``.
public enum JobEvent: Equatable, Sendable {
    /// The scheduler gave the queued job a slot.
    case start
    /// The running attempt ended.
    case attemptEnded(AttemptResult)
    /// The user's `pause`, `resume`, `cancel`, `retry`.
    case pause, resume, cancel, retry
    /// The user's `remove` (`deleteFiles`: also the completed download's file).
    case remove(deleteFiles: Bool)
    /// A waiting job's retry timer fired.
    case retryDue
    /// The network became reachable again.
    case networkReturned
    /// The file system a job waits on (`waitReason` `"disk"`) has the space the job still needs.
    case diskSpaceChanged
    /// The daemon stops a running attempt to run it again later (shutdown, or a silent transfer
    /// when the network returns).
    case requeue(StopReason)
    /// Found running in the store at start (the daemon stopped or crashed); `fileInPlace` when
    /// the job was finalizing and its file is already in place (the crash came after the rename).
    case recovered(fileInPlace: Bool)
    /// A range request of the running segmented download failed and is to be asked for again
    /// (the attempt goes on): allowed while a retry is left, which it spends as a new attempt
    /// would, so that a range is asked for at most retries + 1 times.
    case rangeFailed(TransferError)
    /// The `--on-end` hook of `stage` finished (in any state: the job may have moved on); nil when
    /// there was nothing to run at that stage any more.
    case hookFinished(HookStage, HookResult?)
    /// The user's `set-url`: a download's new URL; `keepPart` when the part's validator lets the
    /// next attempt resume with `If-Range` (otherwise the part is dropped: never spliced).
    case setURL(String, keepPart: Bool)
}

/// How an attempt ended, as far as the job's state is concerned.
public enum AttemptResult: Equatable, Sendable {
    /// Verified and in place: the digest and the size.
    case completed(sha256: String, bytes: Int64)
    /// Failed; `retryAfter` is the server's `Retry-After` in seconds. `retrySpent`: the retry
    /// that the next attempt is was spent already (a segmented download's range failed, and the
    /// attempt ended before asking for it again: ``JobEvent/rangeFailed(_:)``).
    case failed(TransferError, retryAfter: Double?, retrySpent: Bool = false)
}

/// Why the engine stops a running attempt.
public enum StopReason: Equatable, Sendable {
    case pause
    case cancel
    case shutdown
    /// The network came back and this transfer looked dead: start again at once.
    case restart
}

/// What the engine must do after a transition; the machine itself does no I/O.
public enum JobAction: Equatable, Sendable {
    /// Start an attempt (the job is now running).
    case startAttempt
    /// Stop the running attempt.
    case stopAttempt(StopReason)
    /// Queue the job again when the time comes (seconds since 1970).
    case armRetryTimer(at: Double)
    /// Forget the job's retry timer.
    case cancelRetryTimer
    /// Watch the free space of the job's file system; the job waits for it (`"disk"`).
    case watchDiskSpace
    /// Delete the partial data (a download's part, an upload's half-written response file).
    case deletePart
    /// Delete the completed download's file (`remove --delete-files`).
    case deleteFile
    /// Keep the hook owed to an ending the job leaves (``OwedHook``: it is removed, or retried),
    /// written in the command's transaction: `ending` is the patch of the ending a removal makes
    /// (a running job is cancelled first), or nil when the job had ended already and its hook
    /// `stage` is still pending.
    /// (`indirect`, as `notifyRemoved`: a patch held inline made every action of every transition
    /// as large as a patch, 345 bytes.)
    indirect case keepHook(HookStage, ending: JobPatch?)
    /// Tell subscribers (`transfer.state`) that a job being removed ended as `ending` says (a
    /// running job is cancelled first), once its removal is committed.
    indirect case notifyRemoved(ending: JobPatch)
    /// Delete the job's row and history.
    case deleteRow
    /// Tell subscribers (`transfer.state`), after the change is committed.
    case notify
    /// A slot may be free or a job queued: run the scheduler.
    case schedule
    /// Run the `--on-end` hook recorded in the job's `hookPending`, once the change is committed.
    case runHook
}

/// The result of a legal event: the row changes (state included) and the actions.
public struct JobTransition: Equatable, Sendable {
    /// The changes to write (and to apply to the in-memory facts).
    public var patch: JobPatch
    /// What to do, in order.
    public var actions: [JobAction]
}

/// An event that does not apply to the job in its state (a control command's refusal).
public struct JobRefusal: Error, Equatable, Sendable {
    /// The job's state.
    public var state: TransferState
    /// A message for people, naming the job and its state.
    public var message: String
}

/// Facts from outside the job that a transition may depend on.
public struct MachineContext: Sendable {
    /// Wall-clock now, seconds since 1970 (timestamps in the job object are wall clock).
    public var now: Double
    /// Whether the network is reachable.
    public var isReachable: Bool
    /// A jitter sample in -1...1 for the retry delay.
    public var jitter: Double
    /// Whether the job's attempt is finishing (verified, being moved into place).
    public var attemptFinishing: Bool
    /// Whether the daemon has an `--on-end` hook (run after the job's own).
    public var daemonHook: Bool
    /// Another unfinished job that holds this job's file now (its download destination or its
    /// `--response` file): a cancelled job's path is free for a new job, and stays that job's.
    public var pathHolder: Int64?

    /// Creates a context.
    public init(
        now: Double, isReachable: Bool = true, jitter: Double = 0, attemptFinishing: Bool = false,
        daemonHook: Bool = false, pathHolder: Int64? = nil
    ) {
        self.now = now
        self.isReachable = isReachable
        self.jitter = jitter
        self.attemptFinishing = attemptFinishing
        self.daemonHook = daemonHook
        self.pathHolder = pathHolder
    }
}

/// The job state machine (SPEC "States", "Control commands", "Retries and the network"): a pure
/// function from an event and the job's facts to the new state, the row changes and the
/// actions. The only place a job's state changes; every legal transition is unit-tested in
/// `JobMachineTests`.
public enum JobMachine {
    /// The error a cancelled job carries.
    public static let cancelledError = TransferError(.cancelled, "cancelled by the user", retryable: false)

    /// Applies `event` to a job.
    /// - Returns: the transition, or a refusal when the event does not apply in the job's state.
    public static func transition(_ event: JobEvent, _ job: JobFacts, _ ctx: MachineContext)
        -> Result<JobTransition, JobRefusal>
    {
        // The engine holds commands on a finishing job until it has ended; refused meanwhile.
        if ctx.attemptFinishing, isControl(event) {
            return .failure(
                JobRefusal(
                    state: job.state, message: refusal(event, job, reason: "it is running and being moved into place")))
        }
        var p = JobPatch()
        switch (event, job.state) {
        case (.start, .queued):
            p.state = .running
            p.attempts = job.attempts + 1
            p.error = .some(nil)
            p.waitReason = .some(nil)
            p.nextRetryAt = .some(nil)
            return .success(JobTransition(patch: p, actions: [.startAttempt, .notify]))

        case (.attemptEnded(.completed(let digest, let bytes)), .running):
            p.state = .completed
            p.sha256 = digest
            p.durableBytes = bytes
            p.total = bytes
            p.finalizing = false
            p.completedAt = ctx.now
            p.error = .some(nil)
            let hook = ending(&p, job, ctx)
            return .success(JobTransition(patch: p, actions: [.notify, .schedule] + hook))

        case (.attemptEnded(.failed(let error, let retryAfter, let retrySpent)), .running):
            return .success(failed(job, error, retryAfter: retryAfter, retrySpent: retrySpent, ctx))

        case (.pause, .running):
            p.state = .paused
            return .success(JobTransition(patch: p, actions: [.stopAttempt(.pause), .notify, .schedule]))
        case (.pause, .queued), (.pause, .waiting):
            p.state = .paused
            p.waitReason = .some(nil)
            p.nextRetryAt = .some(nil)
            return .success(JobTransition(patch: p, actions: [.cancelRetryTimer, .notify]))

        case (.resume, .paused):
            p.state = .queued
            p.error = .some(nil)
            return .success(JobTransition(patch: p, actions: [.notify, .schedule]))

        case (.retry, .failed), (.retry, .cancelled):
            if let other = ctx.pathHolder, let path = job.heldPath {
                // One path, one job: two jobs would write one part, and one complete with bytes
                // of both (README "One destination, one job").
                return .failure(
                    JobRefusal(
                        state: job.state,
                        message: refusal(event, job, reason: "job \(other) now writes to \(path)")))
            }
            p.state = .queued
            p.retriesUsed = 0
            p.error = .some(nil)
            // The ending it leaves still owes the hooks not finished yet: to a record of their own,
            // so that the next ending's cannot take their place.
            var actions: [JobAction] = [.notify, .schedule]
            if let pending = job.hookPending {
                p.hookPending = .some(nil)
                actions.insert(.keepHook(pending, ending: nil), at: 0)
            }
            return .success(JobTransition(patch: p, actions: actions))

        case (.cancel, .running):
            p.state = .cancelled
            p.error = .some(cancelledError)
            p.merge(.partDiscarded)
            let hook = ending(&p, job, ctx)
            return .success(JobTransition(patch: p, actions: [.stopAttempt(.cancel), .notify, .schedule] + hook))
        case (.cancel, .queued), (.cancel, .waiting), (.cancel, .paused):
            p.state = .cancelled
            p.error = .some(cancelledError)
            p.waitReason = .some(nil)
            p.nextRetryAt = .some(nil)
            p.merge(.partDiscarded)
            let hook = ending(&p, job, ctx)
            return .success(JobTransition(patch: p, actions: [.cancelRetryTimer, .deletePart, .notify] + hook))

        case (.remove(let deleteFiles), let state):
            var actions: [JobAction] = []
            if state == .running { actions.append(.stopAttempt(.cancel)) }
            actions.append(.cancelRetryTimer)
            if state != .completed { actions.append(.deletePart) }
            if deleteFiles && state == .completed && job.kind == .download { actions.append(.deleteFile) }
            // SPEC: a running job is cancelled first — an ending, with its hooks; an ended job's
            // hook not run yet is still owed. Either outlives the row.
            if state == .running {
                var end = JobPatch()
                end.state = .cancelled
                end.error = .some(cancelledError)
                if !ending(&end, job, ctx).isEmpty, let stage = end.hookPending ?? nil {
                    actions.append(.keepHook(stage, ending: end))
                }
                actions.append(.notifyRemoved(ending: end))
            } else if let pending = job.hookPending {
                actions.append(.keepHook(pending, ending: nil))
            }
            actions += [.deleteRow, .schedule]
            return .success(JobTransition(patch: p, actions: actions))

        case (.retryDue, .waiting) where job.waitReason == .backoff:
            p.state = .queued
            p.waitReason = .some(nil)
            p.nextRetryAt = .some(nil)
            return .success(JobTransition(patch: p, actions: [.notify, .schedule]))

        case (.networkReturned, .waiting) where job.waitReason == .offline:
            p.state = .queued
            p.waitReason = .some(nil)
            return .success(JobTransition(patch: p, actions: [.notify, .schedule]))

        case (.diskSpaceChanged, .waiting) where job.waitReason == .disk:
            p.state = .queued
            p.waitReason = .some(nil)
            return .success(JobTransition(patch: p, actions: [.notify, .schedule]))

        case (.rangeFailed(let error), .running):
            guard RetryPolicy(retryLimit: job.retryLimit).shouldRetry(error: error, retriesUsed: job.retriesUsed) else {
                return .failure(
                    JobRefusal(state: job.state, message: "job \(job.id) has no retry left to ask for a range again"))
            }
            p.retriesUsed = job.retriesUsed + 1
            return .success(JobTransition(patch: p, actions: []))

        case (.requeue(let reason), .running):
            p.state = .queued
            // A stopping daemon tells its subscribers too (before it closes their connections),
            // but starts nothing in the freed slot.
            let notify: [JobAction] = reason == .shutdown ? [.notify] : [.notify, .schedule]
            return .success(JobTransition(patch: p, actions: [.stopAttempt(reason)] + notify))

        case (.recovered(let fileInPlace), .running):
            if fileInPlace {
                p.state = .completed
                p.completedAt = .some(ctx.now)
                p.finalizing = false
                let hook = ending(&p, job, ctx)
                return .success(JobTransition(patch: p, actions: hook))
            }
            p.state = .queued
            return .success(JobTransition(patch: p, actions: []))

        case (.setURL(let url, let keepPart), .queued), (.setURL(let url, let keepPart), .paused),
            (.setURL(let url, let keepPart), .waiting), (.setURL(let url, let keepPart), .failed):
            guard job.kind == .download else {
                return .failure(
                    JobRefusal(
                        state: job.state,
                        message: refusal(
                            event, job, reason: "it is a \(job.state.rawValue) upload; set-url is for downloads")))
            }
            p.url = url
            if keepPart { return .success(JobTransition(patch: p, actions: [.notify])) }
            p.merge(.partDiscarded)
            return .success(JobTransition(patch: p, actions: [.deletePart, .notify]))

        case (.hookFinished(let stage, let result), _):
            // The job's own hook is the one its `hook` field shows; the daemon's shows only when
            // the job has none.
            if let result, stage == .job || !job.hasOnEnd { p.hook = .some(result) }
            let next: HookStage? = stage == .job && ctx.daemonHook ? .daemon : nil
            p.hookPending = .some(next)
            return .success(JobTransition(patch: p, actions: next == nil ? [.notify] : [.notify, .runHook]))

        default:
            return .failure(JobRefusal(state: job.state, message: refusal(event, job)))
        }
    }

    /// Whether a job whose attempt found the disk full waits for space (SPEC "Disk full"): all do
    /// but an upload with `--retries 0`, which waiting would send again (its response file is what
    /// did not fit; `--retries 0` is for endpoints that must never see a request twice).
    public static func waitsForDisk(_ job: JobFacts) -> Bool {
        !(job.kind == .upload && job.retryLimit == 0)
    }

    /// A failed attempt: wait for space, wait for the network, wait on a retry timer, or fail.
    private static func failed(
        _ job: JobFacts, _ error: TransferError, retryAfter: Double?, retrySpent: Bool, _ ctx: MachineContext
    ) -> JobTransition {
        var p = JobPatch()
        if error.code == .diskFull && !waitsForDisk(job) {
            // Waiting for space would send the upload again (its response file is what did not
            // fit): `--retries 0` is for endpoints that must never see a request twice (SPEC).
            var final = error
            final.retryable = false
            final.message += "; not sent again (--retries 0)"
            p.state = .failed
            p.error = .some(final)
            let hook = ending(&p, job, ctx)
            return JobTransition(patch: p, actions: [.notify, .schedule] + hook)
        }
        if error.code == .diskFull {
            // SPEC "Disk full": wait for space, retryable, no retry spent, no timer.
            var e = error
            e.retryable = true
            p.state = .waiting
            p.error = .some(e)
            p.waitReason = .some(.disk)
            p.nextRetryAt = .some(nil)
            return JobTransition(patch: p, actions: [.watchDiskSpace, .notify, .schedule])
        }
        let policy = RetryPolicy(retryLimit: job.retryLimit)
        let networkClass = error.code == .network || error.code == .timeout
        if error.retryable && networkClass && !ctx.isReachable {
            p.state = .waiting
            p.error = .some(error)
            p.waitReason = .some(.offline)
            p.nextRetryAt = .some(nil)
            return JobTransition(patch: p, actions: [.notify, .schedule])
        }
        if error.retryable && (retrySpent || policy.shouldRetry(error: error, retriesUsed: job.retriesUsed)) {
            // A retry spent on a range not asked for again is this one: it is not counted twice.
            let k = retrySpent ? max(1, job.retriesUsed) : job.retriesUsed + 1
            let at = ctx.now + policy.delay(forRetry: k, retryAfter: retryAfter, jitter: ctx.jitter)
            p.state = .waiting
            if !retrySpent { p.retriesUsed = k }
            p.error = .some(error)
            p.waitReason = .some(.backoff)
            p.nextRetryAt = .some(at)
            return JobTransition(patch: p, actions: [.armRetryTimer(at: at), .notify, .schedule])
        }
        var final = error
        final.retryable = false
        p.state = .failed
        p.error = .some(final)
        let hook = ending(&p, job, ctx)
        return JobTransition(patch: p, actions: [.notify, .schedule] + hook)
    }

    /// An ending (completed, failed, cancelled): the hook to run is recorded in the same patch
    /// as the ending, the last ending's result is cleared, and `runHook` asked for.
    private static func ending(_ p: inout JobPatch, _ job: JobFacts, _ ctx: MachineContext) -> [JobAction] {
        let stage: HookStage? = job.hasOnEnd ? .job : (ctx.daemonHook ? .daemon : nil)
        guard let stage else { return [] }
        p.hook = .some(nil)
        p.hookPending = .some(stage)
        return [.runHook]
    }

    private static func isControl(_ event: JobEvent) -> Bool {
        switch event {
        case .pause, .resume, .cancel, .retry, .remove: return true
        default: return false
        }
    }

    /// The sentence a refusal shows, naming the job and its state: "cannot pause job 1: it is
    /// completed". The CLI prints it as it is.
    private static func refusal(_ event: JobEvent, _ job: JobFacts, reason: String? = nil) -> String {
        let verb: String
        switch event {
        case .pause: verb = "pause"
        case .resume: verb = "resume"
        case .cancel: verb = "cancel"
        case .retry: verb = "retry"
        case .remove: verb = "remove"
        case .setURL: verb = "set the URL of"
        default: return "job \(job.id) is \(job.state.rawValue): \(event) does not apply"
        }
        return "cannot \(verb) job \(job.id): " + (reason ?? "it is \(job.state.rawValue)")
    }
}
