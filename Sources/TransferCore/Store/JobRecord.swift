import Foundation
import GRDB

/// A source file as it was when its upload was queued.
public struct SourceStamp: Codable, Sendable, Equatable {
    public var path: String
    public var size: Int64
    public var mtime: Double

    public init(path: String, size: Int64, mtime: Double) {
        self.path = path
        self.size = size
        self.mtime = mtime
    }
}

/// One row of the `job` table: a job, its options and its durable progress.
///
/// Nested Codable fields (`request`, `error`, `history`, `response`) are stored as JSON text.
public struct JobRecord: Codable, Sendable, FetchableRecord, MutablePersistableRecord, Equatable {
    public static let databaseTableName = "job"

    public var id: Int64?
    public var kind: JobKind
    /// The URL as given (credentials included; redacted on output).
    public var url: String
    public var method: String
    public var state: TransferState
    /// The normalized request: every option of the job.
    public var request: TransferRequest
    /// Download: the final path (null until the name is known). Upload: the source file.
    public var destination: String?
    /// Download: bytes of the part file that are durable (fdatasync'ed before this was written).
    public var durableBytes: Int64
    public var total: Int64?
    /// Validators of the bytes in the part file, for `If-Range`.
    public var etag: String?
    public var lastModified: String?
    public var attempts: Int
    /// Retries spent under the policy (offline waits spend none).
    public var retriesUsed: Int
    public var httpStatus: Int?
    public var error: TransferError?
    public var waitReason: WaitReason?
    /// Seconds since 1970 of the next retry while waiting on a timer.
    public var nextRetryAt: Double?
    public var priority: Int
    /// Download: the part is whole, synced and verified; the rename may be in progress.
    public var finalizing: Bool
    public var sha256: String?
    /// Upload: the source's size and mtime at enqueue (for `source_changed`).
    public var sourceSize: Int64?
    public var sourceMtime: Double?
    public var response: ResponseInfo?
    /// The attempt history, oldest first: kept in the `attempt` table (migration v3), filled in
    /// by the store when one job is read; not a column of this row.
    public var history: [AttemptRecord] = []
    public var createdAt: Double
    public var updatedAt: Double
    public var completedAt: Double?
    /// Upload: each source file's size and mtime at enqueue, in form order (migration v2; nil for
    /// older rows, which keep the aggregate `sourceSize`/`sourceMtime` check).
    public var sources: [SourceStamp]? = nil
    /// Download: the ranges of a segmented download with their durable offsets
    /// (``SegmentPlan/storedText``; migration v5-segments-limits); nil for one connection.
    public var segments: String? = nil

    enum CodingKeys: String, CodingKey {
        case id, kind, url, method, state, request, destination, durableBytes, total, etag, lastModified, attempts
        case retriesUsed, httpStatus, error, waitReason, nextRetryAt, priority, finalizing, sha256, sourceSize
        case sourceMtime, response, createdAt, updatedAt, completedAt, sources, segments
    }

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}

extension JobRecord {
    /// Applies a patch to this in-memory copy of the row (the store writes the same fields).
    public mutating func apply(_ p: JobPatch) {
        if let v = p.state { state = v }
        if let v = p.url { url = v }
        if let v = p.destination { destination = v }
        if let v = p.durableBytes { durableBytes = v }
        if let v = p.total { total = v }
        if let v = p.etag { etag = v }
        if let v = p.lastModified { lastModified = v }
        if let v = p.attempts { attempts = v }
        if let v = p.retriesUsed { retriesUsed = v }
        if let v = p.httpStatus { httpStatus = v }
        if let v = p.error { error = v }
        if let v = p.waitReason { waitReason = v }
        if let v = p.nextRetryAt { nextRetryAt = v }
        if let v = p.finalizing { finalizing = v }
        if let v = p.sha256 { sha256 = v }
        if let v = p.response { response = v }
        if let v = p.completedAt { completedAt = v }
        if let v = p.segments { segments = v }
    }
}

extension JobRecord {
    /// Decodes a row by hand: GRDB's Codable decoding of every column was most of the cost of
    /// reading the job that starts (8% of the daemon's CPU for thousands of small files).
    public init(row: Row) throws {
        let decoder = JSONDecoder()
        func json<T: Decodable>(_ name: String, _ type: T.Type) throws -> T? {
            guard let text: String = row[name] else { return nil }
            return try decoder.decode(T.self, from: Data(text.utf8))
        }
        let kindText: String = row["kind"]
        let stateText: String = row["state"]
        guard let kind = JobKind(rawValue: kindText), let state = TransferState(rawValue: stateText),
            let request = try json("request", TransferRequest.self)
        else {
            throw DatabaseError(message: "job row \(row["id"] ?? "?") has an unknown kind, state or request")
        }
        id = row["id"]
        self.kind = kind
        url = row["url"]
        method = row["method"]
        self.state = state
        self.request = request
        destination = row["destination"]
        durableBytes = row["durableBytes"]
        total = row["total"]
        etag = row["etag"]
        lastModified = row["lastModified"]
        attempts = row["attempts"]
        retriesUsed = row["retriesUsed"]
        httpStatus = row["httpStatus"]
        error = try json("error", TransferError.self)
        waitReason = (row["waitReason"] as String?).flatMap(WaitReason.init(rawValue:))
        nextRetryAt = row["nextRetryAt"]
        priority = row["priority"]
        finalizing = row["finalizing"]
        sha256 = row["sha256"]
        sourceSize = row["sourceSize"]
        sourceMtime = row["sourceMtime"]
        response = try json("response", ResponseInfo.self)
        createdAt = row["createdAt"]
        updatedAt = row["updatedAt"]
        completedAt = row["completedAt"]
        sources = try json("sources", [SourceStamp].self)
        segments = row["segments"]
    }
}
