/// What the engine keeps in memory about every unfinished job (and every failed one, which still
/// holds its destination for `retry`): enough to choose the next job, check a destination clash
/// and decide a job's next state without reading the database. Built from the store at start and
/// kept in step by applying the same ``JobPatch``es that are written.
public struct JobFacts: Equatable, Sendable {
    /// The job's id.
    public let id: Int64
    /// Download or upload.
    public var kind: JobKind
    /// The job's state.
    public var state: TransferState
    /// Higher runs first.
    public var priority: Int
    /// Download: the target path (nil until the server names it). Upload: the source file.
    public var destination: String?
    /// While waiting: why.
    public var waitReason: WaitReason?
    /// While waiting on a timer: when (seconds since 1970).
    public var nextRetryAt: Double?
    /// Attempts started so far.
    public var attempts: Int
    /// Retries spent under the policy.
    public var retriesUsed: Int
    /// The job's `--retries`.
    public var retryLimit: Int
    /// Download: durable bytes of the part.
    public var durableBytes: Int64
    /// Download: the part is verified and being moved into place.
    public var finalizing: Bool
    /// Whether the job has its own `--on-end` hook.
    public var hasOnEnd: Bool
    /// The hook of the job's last ending still to run, if any.
    public var hookPending: HookStage?
    /// Download: the part holds ranges of a segmented download (recovery must not cut it back to
    /// ``durableBytes``: each range resumes from its own offset).
    public var segmented: Bool
    /// Upload: the `--response` file its answer is saved to, if any.
    public var responseFile: String?

    /// The path this job writes and holds against every other job: a download's destination, an
    /// upload's `--response` file (both go through a `.aftpart` beside them).
    public var heldPath: String? { kind == .download ? destination : responseFile }

    /// The path this job keeps from other jobs now: its ``heldPath``, but for a failed download
    /// with nothing to resume (no durable byte, no ranges: its `retry` starts from zero), which
    /// keeps nothing — another job may take the path (with `--replace`, or once the file is gone);
    /// the failed job's `retry` is then refused while that job holds it. (A failed job's last
    /// checkpoint is written before its failure, so `durableBytes` is final when it fails.)
    public var holdsPath: String? {
        kind == .download && state == .failed && durableBytes == 0 && !segmented ? nil : heldPath
    }

    /// Creates the facts of a job.
    public init(
        id: Int64, kind: JobKind, state: TransferState, priority: Int, destination: String?,
        waitReason: WaitReason? = nil, nextRetryAt: Double? = nil, attempts: Int = 0, retriesUsed: Int = 0,
        retryLimit: Int = RetryPolicy.defaultRetryLimit, durableBytes: Int64 = 0, finalizing: Bool = false,
        hasOnEnd: Bool = false, segmented: Bool = false, hookPending: HookStage? = nil, responseFile: String? = nil
    ) {
        self.id = id
        self.kind = kind
        self.state = state
        self.priority = priority
        self.destination = destination
        self.waitReason = waitReason
        self.nextRetryAt = nextRetryAt
        self.attempts = attempts
        self.retriesUsed = retriesUsed
        self.retryLimit = retryLimit
        self.durableBytes = durableBytes
        self.finalizing = finalizing
        self.hasOnEnd = hasOnEnd
        self.segmented = segmented
        self.hookPending = hookPending
        self.responseFile = responseFile
    }

    /// The facts of a stored row.
    public init(_ r: JobRecord) {
        self.init(
            id: r.id ?? 0, kind: r.kind, state: r.state, priority: r.priority, destination: r.destination,
            waitReason: r.waitReason, nextRetryAt: r.nextRetryAt, attempts: r.attempts, retriesUsed: r.retriesUsed,
            retryLimit: r.request.retries ?? RetryPolicy.defaultRetryLimit, durableBytes: r.durableBytes,
            finalizing: r.finalizing, hasOnEnd: r.request.onEnd != nil, segmented: r.segments != nil,
            hookPending: r.hookPending, responseFile: r.kind == .upload ? r.heldPath : nil)
    }

    /// Applies the same patch the store writes.
    public mutating func apply(_ p: JobPatch) {
        if let v = p.state { state = v }
        if let v = p.destination { destination = v }
        if let v = p.waitReason { waitReason = v }
        if let v = p.nextRetryAt { nextRetryAt = v }
        if let v = p.attempts { attempts = v }
        if let v = p.retriesUsed { retriesUsed = v }
        if let v = p.durableBytes { durableBytes = v }
        if let v = p.finalizing { finalizing = v }
        if let v = p.segments { segmented = v != nil }
        if let v = p.hookPending { hookPending = v }
    }
}
