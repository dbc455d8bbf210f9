/// An `--on-end` hook still owed to a job that `remove` deleted (SPEC: a hook runs once per
/// ending; `remove` cancels a running job first, which is an ending). The row lives in its own
/// table (`removed_hook`, migration v7), written in the removal's transaction and deleted when the
/// last hook of that ending finished, so a crash in between runs the hook again at the next start
/// — as a pending hook of a job that still exists does.
public struct RemovedHook: Equatable, Sendable {
    /// The removed job's id (ids are never reused).
    public var jobId: Int64
    /// Which hook runs next: the job's own, then the daemon's.
    public var stage: HookStage
    /// The state the job ended in (`AFTRANSFER_STATE`).
    public var state: TransferState
    /// The job's destination (`AFTRANSFER_DESTINATION`), if it had one.
    public var destination: String?
    /// The job's own `--on-end` command, if it had one.
    public var onEnd: String?
    /// The job object as it ended, as JSON: the hook's stdin.
    public var job: String

    /// Creates the record of a removed job's hook.
    public init(
        jobId: Int64, stage: HookStage, state: TransferState, destination: String?, onEnd: String?, job: String
    ) {
        self.jobId = jobId
        self.stage = stage
        self.state = state
        self.destination = destination
        self.onEnd = onEnd
        self.job = job
    }
}
