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
    /// `download` or `upload`.
    public var kind: String
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
    public var waitReason: String?
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
    public var history: [AttemptRecord]
    public var createdAt: Double
    public var updatedAt: Double
    public var completedAt: Double?
    /// Upload: each source file's size and mtime at enqueue, in form order (migration v2; nil for
    /// older rows, which keep the aggregate `sourceSize`/`sourceMtime` check).
    public var sources: [SourceStamp]? = nil

    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}
