import Foundation

/// One attempt of a job: its timeline (Alamofire's `Timeline`), as in the job object's `history`.
public struct AttemptRecord: Codable, Sendable, Equatable {
    /// The attempt's number, from 1.
    public var attempt: Int
    /// When it started, RFC 3339 UTC.
    public var startedAt: String
    /// When it ended, RFC 3339 UTC; null while it runs.
    public var endedAt: String?
    /// The response's status; null before one.
    public var httpStatus: Int?
    /// Bytes on disk (download) or sent (upload) when it ended, resumed bytes included.
    public var bytes: Int64
    /// Seconds until the name was resolved.
    public var nameLookup: Double?
    /// Seconds until the connection was made.
    public var connect: Double?
    /// Seconds until the TLS handshake ended (0 without TLS).
    public var tls: Double?
    /// Seconds until the first response byte.
    public var firstByte: Double?
    /// Seconds the attempt took.
    public var total: Double?
    /// Why it ended badly; null otherwise.
    public var error: TransferError?

    /// Creates an attempt record.
    public init(
        attempt: Int, startedAt: String, endedAt: String? = nil, httpStatus: Int? = nil, bytes: Int64 = 0,
        nameLookup: Double? = nil, connect: Double? = nil, tls: Double? = nil, firstByte: Double? = nil,
        total: Double? = nil, error: TransferError? = nil
    ) {
        self.attempt = attempt
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.httpStatus = httpStatus
        self.bytes = bytes
        self.nameLookup = nameLookup
        self.connect = connect
        self.tls = tls
        self.firstByte = firstByte
        self.total = total
        self.error = error
    }

    enum CodingKeys: String, CodingKey {
        case attempt, startedAt, endedAt, httpStatus, bytes, nameLookup, connect, tls, firstByte, total, error
    }

    /// Encodes every field, absent ones as `null`.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(attempt, forKey: .attempt)
        try c.encode(startedAt, forKey: .startedAt)
        try c.encode(endedAt, forKey: .endedAt)
        try c.encode(httpStatus, forKey: .httpStatus)
        try c.encode(bytes, forKey: .bytes)
        try c.encode(nameLookup, forKey: .nameLookup)
        try c.encode(connect, forKey: .connect)
        try c.encode(tls, forKey: .tls)
        try c.encode(firstByte, forKey: .firstByte)
        try c.encode(total, forKey: .total)
        try c.encode(error, forKey: .error)
    }
}

/// The response an upload received (SPEC "Uploads"): kept with the job when no `--response` file.
public struct ResponseInfo: Codable, Sendable, Equatable {
    /// The response's HTTP status.
    public var status: Int
    /// The response's headers, by name.
    public var headers: [String: String]
    /// The first 64 KiB of the body, as UTF-8 (invalid bytes replaced).
    public var body: String

    /// Creates a response record.
    public init(status: Int, headers: [String: String], body: String) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// The job object of SPEC "The job object (JSON)". Field names are stable; absent values are
/// encoded as `null`, never omitted.
public struct JobSnapshot: Codable, Sendable, Equatable {
    /// The job's id (never reused).
    public var id: Int64
    /// `"download"` or `"upload"`.
    public var kind: JobKind
    /// The URL, user and password removed.
    public var url: String
    /// The HTTP method.
    public var method: String
    /// The life-cycle state.
    public var state: TransferState
    /// Download: the target file (null until the name is known); upload: the source file (null for multipart).
    public var destination: String?
    /// Bytes on disk (download) or sent (upload), resumed bytes included.
    public var bytes: Int64
    /// The full size; null while unknown.
    public var total: Int64?
    /// `bytes / total`; null while the total is unknown.
    public var fraction: Double?
    /// Bytes per second, smoothed; 0 when not running.
    public var rate: Double
    /// Seconds left; null when unknown.
    public var eta: Double?
    /// Attempts started.
    public var attempts: Int
    /// The last response's status; null before one.
    public var httpStatus: Int?
    /// Why the job failed or waits; null otherwise.
    public var error: TransferError?
    /// While waiting: `"backoff"` (a timer), `"offline"` (the network) or `"disk"`.
    public var waitReason: WaitReason?
    /// While waiting on a timer: when it fires, RFC 3339 UTC.
    public var nextRetryAt: String?
    /// Whether TLS evaluation was turned off for this job.
    public var insecure: Bool
    /// Hex SHA-256 of the finished file (download) or payload (upload).
    public var sha256: String?
    /// When the job was queued, RFC 3339 UTC.
    public var createdAt: String
    /// When the job's row last changed, RFC 3339 UTC.
    public var updatedAt: String
    /// When the job completed, RFC 3339 UTC; null otherwise.
    public var completedAt: String?
    /// One entry per attempt, oldest first.
    public var history: [AttemptRecord]
    /// Uploads only: the response kept with the job (absent for downloads).
    public var response: ResponseInfo?
    /// Uploads only: the resumable upload's URL, or null (absent for downloads).
    public var uploadUrl: String?
    /// Uploads only: `"ietf"` or `"tus"`, what the server agreed to, or null (absent for downloads).
    public var resumable: ResumableProtocol?
    /// The last ending's `--on-end` hook: its exit status and first 4 KiB of output; null when
    /// none ran (yet).
    public var hook: HookResult?
    /// Connections open now (0 when not running; up to `--connections` for a segmented download).
    /// Optional only so that a job object without it (an older daemon's) still decodes; always
    /// written, as 0 when nil.
    public var connections: Int? = 0

    /// Creates a job object.
    public init(
        id: Int64, kind: JobKind, url: String, method: String, state: TransferState, destination: String?,
        bytes: Int64, total: Int64?, fraction: Double?, rate: Double, eta: Double?, attempts: Int,
        httpStatus: Int?, error: TransferError?, waitReason: WaitReason?, nextRetryAt: String?, insecure: Bool,
        sha256: String?, createdAt: String, updatedAt: String, completedAt: String?, history: [AttemptRecord],
        response: ResponseInfo? = nil, uploadUrl: String? = nil, resumable: ResumableProtocol? = nil,
        hook: HookResult? = nil
    ) {
        self.id = id
        self.kind = kind
        self.url = url
        self.method = method
        self.state = state
        self.destination = destination
        self.bytes = bytes
        self.total = total
        self.fraction = fraction
        self.rate = rate
        self.eta = eta
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
        self.history = history
        self.response = response
        self.uploadUrl = uploadUrl
        self.resumable = resumable
        self.hook = hook
    }

    enum CodingKeys: String, CodingKey {
        case id, kind, url, method, state, destination, bytes, total, fraction, rate, eta, attempts, httpStatus
        case error, waitReason, nextRetryAt, insecure, sha256, createdAt, updatedAt, completedAt, history, response
        case uploadUrl, resumable
        case hook
        case connections
    }

    /// Encodes every field, absent ones as `null`; `response`, `uploadUrl` and `resumable` for
    /// uploads only.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(kind, forKey: .kind)
        try c.encode(url, forKey: .url)
        try c.encode(method, forKey: .method)
        try c.encode(state, forKey: .state)
        try c.encode(destination, forKey: .destination)
        try c.encode(bytes, forKey: .bytes)
        try c.encode(total, forKey: .total)
        try c.encode(fraction, forKey: .fraction)
        try c.encode(rate, forKey: .rate)
        try c.encode(eta, forKey: .eta)
        try c.encode(attempts, forKey: .attempts)
        try c.encode(httpStatus, forKey: .httpStatus)
        try c.encode(error, forKey: .error)
        try c.encode(waitReason, forKey: .waitReason)
        try c.encode(nextRetryAt, forKey: .nextRetryAt)
        try c.encode(insecure, forKey: .insecure)
        try c.encode(sha256, forKey: .sha256)
        try c.encode(createdAt, forKey: .createdAt)
        try c.encode(updatedAt, forKey: .updatedAt)
        try c.encode(completedAt, forKey: .completedAt)
        try c.encode(connections ?? 0, forKey: .connections)
        try c.encode(history, forKey: .history)
        try c.encode(hook, forKey: .hook)
        if kind == .upload {
            try c.encode(response, forKey: .response)
            try c.encode(uploadUrl, forKey: .uploadUrl)
            try c.encode(resumable, forKey: .resumable)
        }
    }
}

/// One range of a running segmented download (`transfer.segments`).
public struct SegmentProgress: Codable, Sendable, Equatable {
    /// The range's first byte.
    public var start: Int64
    /// One past its last byte.
    public var end: Int64
    /// Bytes of the range on disk.
    public var bytes: Int64

    /// Creates the value.
    public init(start: Int64, end: Int64, bytes: Int64) {
        self.start = start
        self.end = end
        self.bytes = bytes
    }
}
