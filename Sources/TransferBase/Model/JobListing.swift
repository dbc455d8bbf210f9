/// The stored fields the job object is made of (everything but the live progress of a running
/// attempt): read a page at a time for `transfer.list`, or taken from a full `JobRecord` (in the daemon).
public struct JobListing: Equatable, Sendable {
    /// The job's id.
    public var id: Int64
    /// Download or upload.
    public var kind: JobKind
    /// The URL as stored (credentials included; redacted in the job object).
    public var url: String
    /// The method of the job's requests (`GET`, `PUT`, `POST`).
    public var method: String
    /// The job's state.
    public var state: TransferState
    /// Download: the target path (nil until named). Upload: the source file.
    public var destination: String?
    /// Download: the part's bytes that are durable (its last checkpoint). Upload: bytes sent.
    public var durableBytes: Int64
    /// The size, once known.
    public var total: Int64?
    /// Attempts started so far.
    public var attempts: Int
    /// The last response's status.
    public var httpStatus: Int?
    /// The last attempt's error, if it failed.
    public var error: TransferError?
    /// While waiting: why.
    public var waitReason: WaitReason?
    /// While waiting on a timer: when (seconds since 1970).
    public var nextRetryAt: Double?
    /// Whether TLS verification is off for this job.
    public var insecure: Bool
    /// The digest of the finished file (download) or payload (upload).
    public var sha256: String?
    /// When the job was queued (seconds since 1970).
    public var createdAt: Double
    /// When the job's row last changed (seconds since 1970).
    public var updatedAt: Double
    /// When the job completed (seconds since 1970).
    public var completedAt: Double?
    /// Upload: what the server answered.
    public var response: ResponseInfo?
    /// The attempt history, oldest first.
    public var history: [AttemptRecord]
    /// Upload: the resumable upload's URL, or nil.
    public var uploadUrl: String?
    /// Upload: the resumable protocol the server agreed to, or nil.
    public var resumable: ResumableProtocol?
    /// The last ending's `--on-end` hook result.
    public var hook: HookResult?

    /// Creates a listing from its fields.
    public init(
        id: Int64, kind: JobKind, url: String, method: String, state: TransferState, destination: String?,
        durableBytes: Int64, total: Int64?, attempts: Int, httpStatus: Int?, error: TransferError?,
        waitReason: WaitReason?, nextRetryAt: Double?, insecure: Bool, sha256: String?, createdAt: Double,
        updatedAt: Double, completedAt: Double?, response: ResponseInfo?, history: [AttemptRecord],
        uploadUrl: String? = nil, resumable: ResumableProtocol? = nil, hook: HookResult? = nil
    ) {
        self.id = id
        self.kind = kind
        self.url = url
        self.method = method
        self.state = state
        self.destination = destination
        self.durableBytes = durableBytes
        self.total = total
        self.attempts = attempts
        self.httpStatus = httpStatus
        self.error = error
        self.waitReason = waitReason
        self.nextRetryAt = nextRetryAt
        self.insecure = insecure
        self.sha256 = sha256
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.completedAt = completedAt
        self.response = response
        self.history = history
        self.uploadUrl = uploadUrl
        self.resumable = resumable
        self.hook = hook
    }
}

/// Live progress of a running attempt, laid over a listing to make the job object.
public struct LiveProgress: Equatable, Sendable {
    /// Bytes on disk (download) or sent (upload), resumed bytes included.
    public var bytes: Int64
    /// The size, once known.
    public var total: Int64?
    /// Smoothed bytes per second.
    public var rate: Double
    /// Connections open now.
    public var connections: Int
    /// The running attempt's last response status, once it has one (the stored one is the last
    /// ended attempt's).
    public var httpStatus: Int?

    /// Creates live progress.
    public init(bytes: Int64, total: Int64?, rate: Double, connections: Int = 0, httpStatus: Int? = nil) {
        self.bytes = bytes
        self.total = total
        self.rate = rate
        self.connections = connections
        self.httpStatus = httpStatus
    }
}

extension JobSnapshot {
    /// The job object of a listing; `live` is the running attempt's progress, `lastBytes` what a
    /// just-ended attempt left in its part (so a paused job never shows fewer bytes than it did).
    public init(_ l: JobListing, live: LiveProgress?, lastBytes: Int64? = nil) {
        var bytes = live?.bytes ?? max(l.durableBytes, lastBytes ?? 0)
        let total = live?.total ?? l.total
        if l.state == .completed, let total { bytes = total }
        let rate = live?.rate ?? 0
        var fraction: Double?
        if let total { fraction = total > 0 ? min(1, Double(bytes) / Double(total)) : 1 }
        var eta: Double?
        if let total, l.state == .running, rate > 0 { eta = max(0, Double(total - bytes) / rate) }
        if l.state == .completed { eta = 0 }
        self.init(
            id: l.id, kind: l.kind, url: URLRedaction.redact(l.url), method: l.method, state: l.state,
            destination: l.destination, bytes: bytes, total: total, fraction: fraction, rate: rate, eta: eta,
            attempts: l.attempts, httpStatus: live?.httpStatus ?? l.httpStatus, error: l.error,
            waitReason: l.waitReason,
            nextRetryAt: l.nextRetryAt.map(Timestamp.rfc3339), insecure: l.insecure, sha256: l.sha256,
            createdAt: Timestamp.rfc3339(l.createdAt), updatedAt: Timestamp.rfc3339(l.updatedAt),
            completedAt: l.completedAt.map(Timestamp.rfc3339), history: l.history,
            response: l.kind == .upload ? l.response : nil, uploadUrl: l.uploadUrl.map(URLRedaction.redact),
            resumable: l.resumable, hook: l.hook)
        connections = l.state == .running ? live?.connections ?? 0 : 0
    }
}
