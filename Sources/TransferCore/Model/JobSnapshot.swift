import Foundation

/// One attempt of a job: its timeline (Alamofire's `Timeline`), as in the job object's `history`.
public struct AttemptRecord: Codable, Sendable, Equatable {
    public var attempt: Int
    public var startedAt: String
    public var endedAt: String?
    public var httpStatus: Int?
    public var bytes: Int64
    public var nameLookup: Double?
    public var connect: Double?
    public var tls: Double?
    public var firstByte: Double?
    public var total: Double?
    public var error: TransferError?

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
    public var status: Int
    public var headers: [String: String]
    /// The first 64 KiB of the body, as UTF-8 (invalid bytes replaced).
    public var body: String

    public init(status: Int, headers: [String: String], body: String) {
        self.status = status
        self.headers = headers
        self.body = body
    }
}

/// The job object of SPEC "The job object (JSON)". Field names are stable; absent values are
/// encoded as `null`, never omitted.
public struct JobSnapshot: Codable, Sendable, Equatable {
    public var id: Int64
    public var kind: JobKind
    public var url: String
    public var method: String
    public var state: TransferState
    public var destination: String?
    public var bytes: Int64
    public var total: Int64?
    public var fraction: Double?
    public var rate: Double
    public var eta: Double?
    public var attempts: Int
    public var httpStatus: Int?
    public var error: TransferError?
    public var waitReason: WaitReason?
    public var nextRetryAt: String?
    public var insecure: Bool
    public var sha256: String?
    public var createdAt: String
    public var updatedAt: String
    public var completedAt: String?
    public var history: [AttemptRecord]
    /// Uploads only: the response kept with the job (absent for downloads).
    public var response: ResponseInfo?

    public init(
        id: Int64, kind: JobKind, url: String, method: String, state: TransferState, destination: String?,
        bytes: Int64, total: Int64?, fraction: Double?, rate: Double, eta: Double?, attempts: Int,
        httpStatus: Int?, error: TransferError?, waitReason: WaitReason?, nextRetryAt: String?, insecure: Bool,
        sha256: String?, createdAt: String, updatedAt: String, completedAt: String?, history: [AttemptRecord],
        response: ResponseInfo? = nil
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
    }

    enum CodingKeys: String, CodingKey {
        case id, kind, url, method, state, destination, bytes, total, fraction, rate, eta, attempts, httpStatus
        case error, waitReason, nextRetryAt, insecure, sha256, createdAt, updatedAt, completedAt, history, response
    }

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
        try c.encode(history, forKey: .history)
        if kind == .upload { try c.encode(response, forKey: .response) }
    }
}
