/// What the RPC handlers need from the transfer engine. Loop-thread only.
public protocol JobService: AnyObject {
    /// Validates and queues one job. Throws `TransferError` for refused input.
    func add(_ request: TransferRequest) throws -> JobSnapshot
    /// Checks one request as `add` would (validation, destination clashes with stored jobs)
    /// without queuing it. Throws `TransferError`.
    @discardableResult
    func prevalidate(_ request: TransferRequest) throws -> TransferRequest
    /// Queues all requests in one transaction, or none. Throws `BatchRefusal` naming the first refused index (from 0).
    func addMany(_ requests: [TransferRequest]) throws -> [JobSnapshot]
    /// ``addMany(_:)`` of requests ``prevalidate(_:)`` returned (a batch's parts, checked as they
    /// arrived): they are not validated again, only checked for clashes.
    func addMany(validated requests: [TransferRequest]) throws -> [JobSnapshot]
    /// One job's object, or nil.
    func job(_ id: Int64) -> JobSnapshot?
    /// Up to `limit` jobs with id > `after` (nil: from the start), in id order, optionally in one state.
    func jobs(state: TransferState?, after: Int64?, limit: Int) -> [JobSnapshot]
    /// Applies a control action to each id (SPEC "Control commands").
    func control(_ action: ControlAction, ids: [Int64], deleteFiles: Bool) -> ControlResult
    /// The equivalent curl command of a job, secrets redacted; nil for an unknown id.
    func curlCommand(_ id: Int64) -> String?
    /// Number of jobs in each state (every state present).
    func counts() -> [TransferState: Int]
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
