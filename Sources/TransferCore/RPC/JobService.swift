/// What the RPC handlers need from the transfer engine. Loop-thread only.
public protocol JobService: AnyObject {
    /// Validates and queues one job. Throws `TransferError` for refused input.
    func add(_ request: TransferRequest) throws -> JobSnapshot
    /// Checks one request as `add` would (validation, destination clashes with stored jobs)
    /// without queuing it, and returns the new job's row. Throws `TransferError`.
    func prepare(_ request: TransferRequest) throws -> JobRecord
    /// Queues all requests in one transaction, or none. Throws `BatchRefusal` naming the first refused index (from 0).
    func addMany(_ requests: [TransferRequest]) throws -> AddedJobs
    /// Holds rows ``prepare(_:)`` made for a batch sent in parts, after those already held.
    func stage(_ records: [JobRecord], batch: String) throws
    /// Forgets the rows held for a batch that was dropped.
    func discardStaged(batch: String)
    /// Queues a complete batch's held rows in one transaction, or none, after checking its
    /// destinations against the jobs queued since its parts arrived.
    /// - Returns: the new jobs' ids (consecutive, in the batch's order).
    /// - Throws: `BatchRefusal` naming the first request whose destination is now taken.
    func addStaged(_ batch: BatchAssembler.Complete) throws -> ClosedRange<Int64>
    /// One job's object, or nil.
    func job(_ id: Int64) -> JobSnapshot?
    /// Up to `limit` jobs with id > `after` (nil: from the start), in id order, optionally in one state.
    func jobs(state: TransferState?, after: Int64?, limit: Int) -> [JobSnapshot]
    /// Applies a control action to each id (SPEC "Control commands"), now or once no id names a
    /// job whose file is being put in place; `answer` gets the result, or `TransferError`
    /// `disk_full` when the job database cannot be written (nothing changed then).
    func control(
        _ action: ControlAction, ids: [Int64], deleteFiles: Bool,
        answer: @escaping (Result<ControlResult, Error>) -> Void)
    /// Gives a queued, paused, waiting or failed download a new URL (`transfer.setUrl`); it keeps
    /// its state and its part when the part can be resumed with `If-Range`. Nil for an unknown id.
    /// Throws `TransferError` for a refused URL, ``JobRefusal`` for a job in another state.
    func setURL(_ id: Int64, url: String) throws -> JobSnapshot?
    /// The equivalent curl command of a job, secrets redacted; nil for an unknown id.
    func curlCommand(_ id: Int64) -> String?
    /// Number of jobs in each state (every state present).
    func counts() -> [TransferState: Int]
    /// Transfers running now.
    var activeTransfers: Int { get }
    /// Bytes per second of all running transfers together.
    var totalRate: Double { get }
    /// The ranges of a running segmented download (empty otherwise); nil for an unknown id.
    func segments(of id: Int64) -> [SegmentProgress]?
    /// The daemon-wide bandwidth limits in force now.
    func currentLimits() -> LimitsInForce
    /// Changes the daemon-wide limits (values as the `limit` options take them: `2M`, `off`,
    /// a schedule's text; nil leaves one as it is), persists and applies them. Throws
    /// `TransferError` for a malformed value (nothing changes).
    func setLimits(download: String?, upload: String?, schedule: String?) throws -> LimitsInForce
    /// Whether the network is reachable.
    var isReachable: Bool { get }
    /// Commits the changes made so far in this loop pass (group commit); responses are sent after it.
    func commit() throws
}
