/// Changes to one job's row: only the fields that are set are written (a column-level `UPDATE`).
///
/// Nullable columns are double optionals: `nil` leaves the column as it is, `.some(nil)` writes
/// NULL. Produced by ``JobMachine`` and the attempt code, merged per job and committed by the
/// store's group commit (``WriteBatch``).
public struct JobPatch: Equatable, Sendable {
    /// The new state.
    public var state: TransferState?
    /// A new URL (`set-url`).
    public var url: String?
    /// The target path once named (download), or nil.
    public var destination: String??
    /// The durable bytes after a checkpoint.
    public var durableBytes: Int64?
    /// The size, once known (nil: unknown again).
    public var total: Int64??
    /// The validators of the part's bytes, for `If-Range`.
    public var etag: String??
    /// (With `etag`.) The `Last-Modified` of the part's bytes.
    public var lastModified: String??
    /// Attempts started so far.
    public var attempts: Int?
    /// Retries spent under the policy.
    public var retriesUsed: Int?
    /// The last response's status.
    public var httpStatus: Int??
    /// The last attempt's error, or nil to clear it.
    public var error: TransferError??
    /// Why the job waits, or nil.
    public var waitReason: WaitReason??
    /// When a timer's wait ends, or nil.
    public var nextRetryAt: Double??
    /// Whether the verified part is being put in place.
    public var finalizing: Bool?
    /// The digest of the finished file or payload.
    public var sha256: String??
    /// Upload: what the server answered.
    public var response: ResponseInfo??
    /// When the job completed.
    public var completedAt: Double??
    /// Upload: the resumable upload's URL (migration v4-resumable).
    public var uploadUrl: String??
    /// Upload: the resumable protocol the server agreed to.
    public var resumable: ResumableProtocol??
    /// Upload: the largest append the server takes (`max-append-size`), once learnt.
    public var appendLimit: Int64??
    /// The `--on-end` hook still to run for the job's last ending (nil: none).
    public var hookPending: HookStage??
    /// The last ending's hook result.
    public var hook: HookResult??
    /// A segmented download's ranges and durable offsets (``SegmentPlan/storedText``).
    public var segments: String??

    /// An empty patch (changes nothing).
    public init() {}

    /// Whether the patch changes nothing.
    public var isEmpty: Bool { self == JobPatch() }

    /// Adds `later` on top of this patch: every field `later` sets wins.
    public mutating func merge(_ later: JobPatch) {
        if let v = later.state { state = v }
        if let v = later.url { url = v }
        if let v = later.destination { destination = v }
        if let v = later.durableBytes { durableBytes = v }
        if let v = later.total { total = v }
        if let v = later.etag { etag = v }
        if let v = later.lastModified { lastModified = v }
        if let v = later.attempts { attempts = v }
        if let v = later.retriesUsed { retriesUsed = v }
        if let v = later.httpStatus { httpStatus = v }
        if let v = later.error { error = v }
        if let v = later.waitReason { waitReason = v }
        if let v = later.nextRetryAt { nextRetryAt = v }
        if let v = later.finalizing { finalizing = v }
        if let v = later.sha256 { sha256 = v }
        if let v = later.response { response = v }
        if let v = later.completedAt { completedAt = v }
        if let v = later.uploadUrl { uploadUrl = v }
        if let v = later.resumable { resumable = v }
        if let v = later.appendLimit { appendLimit = v }
        if let v = later.hookPending { hookPending = v }
        if let v = later.hook { hook = v }
        if let v = later.segments { segments = v }
    }

    /// A patch that forgets the part's bytes: durable offset 0 and no validators.
    public static var partDiscarded: JobPatch {
        var p = JobPatch()
        p.durableBytes = 0
        p.etag = .some(nil)
        p.lastModified = .some(nil)
        p.segments = .some(nil)
        return p
    }
}
