/// An `--on-end` hook owed to an ending that the job's row no longer shows (SPEC: the hooks run
/// once per ending): the job was removed (`remove` cancels a running job first, which is an
/// ending), or retried, before the ending's last hook finished. The row lives in its own table
/// (`owed_hook`, migration v8), written in the transaction of the removal or retry and deleted
/// when the ending's last hook finished, so a crash in between runs the hook again at the next
/// start — as a pending hook of a job's current ending (`hookPending`) does. A job may owe
/// several: one for each ending it left.
public struct OwedHook: Equatable, Sendable {
    /// The record's own id (given by the daemon; never two alike while both are owed).
    public var id: Int64
    /// The job's id (ids are never reused; the job may be gone).
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

    /// Creates the record of a hook owed to an ending.
    public init(
        id: Int64, jobId: Int64, stage: HookStage, state: TransferState, destination: String?, onEnd: String?,
        job: String
    ) {
        self.id = id
        self.jobId = jobId
        self.stage = stage
        self.state = state
        self.destination = destination
        self.onEnd = onEnd
        self.job = job
    }
}
