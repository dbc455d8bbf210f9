import Foundation
import GRDB

/// A source file as it was when its upload was queued.
public struct SourceStamp: Codable, Sendable, Equatable {
    /// The source file (absolute).
    public var path: String
    /// Its size at enqueue.
    public var size: Int64
    /// Its modification time at enqueue (seconds since 1970).
    public var mtime: Double

    /// A stamp of `path`.
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
    /// The table (GRDB).
    public static let databaseTableName = "job"

    /// The job's id (nil until inserted).
    public var id: Int64?
    /// Download or upload.
    public var kind: JobKind
    /// The URL as given (credentials included; redacted on output).
    public var url: String
    /// The method of the job's requests.
    public var method: String
    /// The job's state.
    public var state: TransferState
    /// The normalized request: every option of the job.
    public var request: TransferRequest
    /// Download: the final path (null until the name is known). Upload: the source file.
    public var destination: String?
    /// Download: bytes of the part file that are durable (fdatasync'ed before this was written).
    public var durableBytes: Int64
    /// The size, once known.
    public var total: Int64?
    /// Validators of the bytes in the part file, for `If-Range`.
    public var etag: String?
    /// (With `etag`.) The `Last-Modified` of the bytes in the part file.
    public var lastModified: String?
    /// Attempts started so far.
    public var attempts: Int
    /// Retries spent under the policy (offline waits spend none).
    public var retriesUsed: Int
    /// The last response's status.
    public var httpStatus: Int?
    /// The last attempt's error, if it failed.
    public var error: TransferError?
    /// While waiting: why.
    public var waitReason: WaitReason?
    /// Seconds since 1970 of the next retry while waiting on a timer.
    public var nextRetryAt: Double?
    /// Higher runs first.
    public var priority: Int
    /// Download: the part is whole, synced and verified; the rename may be in progress.
    public var finalizing: Bool
    /// The digest of the finished file (download) or payload (upload).
    public var sha256: String?
    /// Upload: the source's size and mtime at enqueue (for `source_changed`).
    public var sourceSize: Int64?
    /// (With `sourceSize`.) The source's mtime at enqueue.
    public var sourceMtime: Double?
    /// Upload: what the server answered.
    public var response: ResponseInfo?
    /// The attempt history, oldest first: kept in the `attempt` table (migration v3), filled in
    /// by the store when one job is read; not a column of this row.
    public var history: [AttemptRecord] = []
    /// When the job was queued (seconds since 1970).
    public var createdAt: Double
    /// When the row last changed (seconds since 1970).
    public var updatedAt: Double
    /// When the job completed (seconds since 1970).
    public var completedAt: Double?
    /// Upload: each source file's size and mtime at enqueue, in form order (migration v2; nil for
    /// older rows, which keep the aggregate `sourceSize`/`sourceMtime` check).
    public var sources: [SourceStamp]? = nil
    /// Upload: the resumable upload's URL, once the server gave one (migration v4-resumable).
    public var uploadUrl: String? = nil
    /// Upload: the resumable protocol the server agreed to (`ietf`, `tus`), or nil.
    public var resumable: ResumableProtocol? = nil
    /// Upload: the server's `max-append-size`, once learnt.
    public var appendLimit: Int64? = nil
    /// The `--on-end` hook still to run for the last ending (migration v6-hooks).
    public var hookPending: HookStage? = nil
    /// The last ending's hook result (migration v6-hooks).
    public var hook: HookResult? = nil
    /// Download: the ranges of a segmented download with their durable offsets
    /// (``SegmentPlan/storedText``; migration v5-segments-limits); nil for one connection.
    public var segments: String? = nil

    enum CodingKeys: String, CodingKey {
        case id, kind, url, method, state, request, destination, durableBytes, total, etag, lastModified, attempts
        case retriesUsed, httpStatus, error, waitReason, nextRetryAt, priority, finalizing, sha256, sourceSize
        case sourceMtime, response, createdAt, updatedAt, completedAt, sources, uploadUrl, resumable, appendLimit
        case hookPending, hook, segments
    }

    /// Takes the id SQLite gave the new row (GRDB).
    public mutating func didInsert(_ inserted: InsertionSuccess) {
        id = inserted.rowID
    }
}

extension JobRecord {
    /// Sets the `seq`-th history entry (from 0), appending it when it is the next one.
    mutating func putHistory(_ entry: AttemptRecord, at seq: Int) {
        if seq < history.count { history[seq] = entry } else if seq == history.count { history.append(entry) }
    }

    /// The path this job writes and holds against every other job: a download's destination, an
    /// upload's `--response` file (both go through a `.aftpart` beside them).
    public var heldPath: String? { kind == .download ? destination : request.response }

    /// The method of the job's first request: a tus upload starts with its creation, a `POST`,
    /// whatever the job's method (the log and `aftransfer curl` name it).
    public var firstMethod: String { kind == .upload && request.resumableMode == .tus ? "POST" : method }

    /// Whether a request of this job that may have reached the server is never sent again: an
    /// upload with `--retries 0` (SPEC: for endpoints that must never see a request twice) with
    /// no resumable upload to go on with (whose offset query sends no byte twice).
    public var sentAtMostOnce: Bool { kind == .upload && request.retries == 0 && uploadUrl == nil }

    /// Applies a patch made at `updatedAt` (seconds since 1970), as the store writes it.
    public mutating func apply(_ p: JobPatch, at updatedAt: Double) {
        apply(p)
        self.updatedAt = updatedAt
    }

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
        if let v = p.uploadUrl { uploadUrl = v }
        if let v = p.resumable { resumable = v }
        if let v = p.appendLimit { appendLimit = v }
        if let v = p.hookPending { hookPending = v }
        if let v = p.hook { hook = v }
        if let v = p.segments { segments = v }
    }
}

extension JobRecord {
    /// The columns ``init(row:)`` reads, in its order: every read of whole jobs selects these.
    static let selection = """
        id, kind, url, method, state, request, destination, durableBytes, total, etag, lastModified, attempts,
        retriesUsed, httpStatus, error, waitReason, nextRetryAt, priority, finalizing, sha256, sourceSize,
        sourceMtime, response, createdAt, updatedAt, completedAt, sources, uploadUrl, resumable, appendLimit,
        hookPending, hook, segments
        """

    /// Decodes a row of ``selection`` by position. By hand: GRDB's Codable decoding of every column
    /// was most of the cost of reading the job that starts (8% of the daemon's CPU for thousands of
    /// small files), and looking columns up by name (lowercased, compared one by one) half of the
    /// rest. The JSON columns go through ``JSONParser`` and ``JSONValueDecoder``.
    public init(row: Row) throws {
        let decoder = JSONValueDecoder()
        func json<T: Decodable>(_ index: Int, _ type: T.Type) throws -> T? {
            guard let text: String = row[index] else { return nil }
            return try decoder.decode(T.self, fromJSON: text)
        }
        let kindText: String = row[1]
        let stateText: String = row[4]
        guard let kind = JobKind(rawValue: kindText), let state = TransferState(rawValue: stateText),
            let request = try json(5, TransferRequest.self)
        else {
            throw DatabaseError(message: "job row \(row[0] ?? "?") has an unknown kind, state or request")
        }
        id = row[0]
        self.kind = kind
        url = row[2]
        method = row[3]
        self.state = state
        self.request = request
        destination = row[6]
        durableBytes = row[7]
        total = row[8]
        etag = row[9]
        lastModified = row[10]
        attempts = row[11]
        retriesUsed = row[12]
        httpStatus = row[13]
        error = try json(14, TransferError.self)
        waitReason = (row[15] as String?).flatMap(WaitReason.init(rawValue:))
        nextRetryAt = row[16]
        priority = row[17]
        finalizing = row[18]
        sha256 = row[19]
        sourceSize = row[20]
        sourceMtime = row[21]
        response = try json(22, ResponseInfo.self)
        createdAt = row[23]
        updatedAt = row[24]
        completedAt = row[25]
        sources = try json(26, [SourceStamp].self)
        uploadUrl = row[27]
        resumable = (row[28] as String?).flatMap(ResumableProtocol.init(rawValue:))
        appendLimit = row[29]
        hookPending = (row[30] as Int?).flatMap(HookStage.init(rawValue:))
        hook = try json(31, HookResult.self)
        segments = row[32]
    }
}
