import Foundation
import GRDB

/// The SQLite job store: WAL mode, append-only migrations (``Migrations``), group commit of the
/// changes of one loop pass (``commit(_:now:)``) with cached statements that write only the
/// columns that changed, and the attempt history in its own table.
/// Loop-thread only (GRDB's queue makes each call synchronous on the caller's thread).
public final class JobStore {
    private let db: DatabaseQueue
    private let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys]
        return e
    }()
    private let decoder = JSONDecoder()

    /// Opens (creating if needed) the database at `path` and migrates it.
    public init(path: String) throws {
        var config = Configuration()
        config.label = "aftransfer.store"
        config.busyMode = .timeout(5)
        config.prepareDatabase { db in
            // WAL for crash safety with concurrent readers; NORMAL is durable against process
            // crashes, and the part-file data is fdatasync'ed before its offset is recorded.
            try db.execute(sql: "PRAGMA journal_mode = WAL")
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        db = try DatabaseQueue(path: path, configuration: config)
        try Migrations.migrator.migrate(db)
    }

    // MARK: - Writing

    /// Inserts new jobs in one transaction, all or none; returns them with their ids. One cached
    /// statement bound by hand: GRDB's record encoding (a container of every column, then an
    /// insert that fetches the row back) was a third of the daemon's time queuing 100,000 jobs.
    public func insert(_ records: [JobRecord]) throws -> [JobRecord] {
        var copy = records
        try insert(&copy)
        return copy
    }

    /// Inserts new jobs in one transaction, all or none, setting each record's id in place (no
    /// second copy of 100,000 rows in memory).
    public func insert(_ records: inout [JobRecord]) throws {
        try db.write { db in
            let statement = try db.cachedStatement(
                sql: """
                    INSERT INTO job (kind, url, method, state, request, destination, durableBytes, total, etag,
                        lastModified, attempts, retriesUsed, httpStatus, error, waitReason, nextRetryAt, priority,
                        finalizing, sha256, sourceSize, sourceMtime, response, createdAt, updatedAt, completedAt,
                        sources)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """)
            for i in records.indices {
                let r = records[i]
                let values: [DatabaseValueConvertible?] = [
                    r.kind.rawValue, r.url, r.method, r.state.rawValue, try json(r.request), r.destination,
                    r.durableBytes, r.total, r.etag, r.lastModified, r.attempts, r.retriesUsed, r.httpStatus,
                    try json(r.error), r.waitReason?.rawValue, r.nextRetryAt, r.priority, r.finalizing, r.sha256,
                    r.sourceSize, r.sourceMtime, try json(r.response), r.createdAt, r.updatedAt, r.completedAt,
                    try json(r.sources),
                ]
                try statement.execute(arguments: StatementArguments(values))
                records[i].id = db.lastInsertedRowID
            }
        }
    }

    /// Inserts one new job and returns it with its id.
    public func insert(_ record: JobRecord) throws -> JobRecord {
        try insert([record])[0]
    }

    /// Writes a batch in one transaction: column-level updates, history entries, deletions.
    /// `now` becomes the `updatedAt` of every changed job.
    public func commit(_ batch: WriteBatch, now: Double) throws {
        guard !batch.isEmpty else { return }
        try db.write { db in
            for (id, patch) in batch.patches {
                var columns: [String] = []
                var values: [DatabaseValueConvertible?] = []
                func set(_ name: String, _ v: DatabaseValueConvertible?) {
                    columns.append(name)
                    values.append(v)
                }
                if let v = patch.state { set("state", v.rawValue) }
                if let v = patch.url { set("url", v) }
                if let v = patch.destination { set("destination", v) }
                if let v = patch.durableBytes { set("durableBytes", v) }
                if let v = patch.total { set("total", v) }
                if let v = patch.etag { set("etag", v) }
                if let v = patch.lastModified { set("lastModified", v) }
                if let v = patch.attempts { set("attempts", v) }
                if let v = patch.retriesUsed { set("retriesUsed", v) }
                if let v = patch.httpStatus { set("httpStatus", v) }
                if let v = patch.error { set("error", try json(v)) }
                if let v = patch.waitReason { set("waitReason", v?.rawValue) }
                if let v = patch.nextRetryAt { set("nextRetryAt", v) }
                if let v = patch.finalizing { set("finalizing", v) }
                if let v = patch.sha256 { set("sha256", v) }
                if let v = patch.response { set("response", try json(v)) }
                if let v = patch.completedAt { set("completedAt", v) }
                if let v = patch.segments { set("segments", v) }
                set("updatedAt", now)
                let sql = "UPDATE job SET " + columns.map { "\($0) = ?" }.joined(separator: ", ") + " WHERE id = ?"
                values.append(id)
                let statement = try db.cachedStatement(sql: sql)
                try statement.execute(arguments: StatementArguments(values))
            }
            if !batch.attempts.isEmpty {
                let statement = try db.cachedStatement(
                    sql: """
                        INSERT OR REPLACE INTO attempt (jobId, seq, attempt, startedAt, endedAt, httpStatus, bytes,
                            nameLookup, connect, tls, firstByte, total, error)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """)
                for (key, a) in batch.attempts {
                    try statement.execute(arguments: [
                        key.jobId, key.seq, a.attempt, a.startedAt, a.endedAt, a.httpStatus, a.bytes, a.nameLookup,
                        a.connect, a.tls, a.firstByte, a.total, try json(a.error),
                    ])
                }
            }
            if !batch.deletions.isEmpty {
                let attempts = try db.cachedStatement(sql: "DELETE FROM attempt WHERE jobId = ?")
                let jobs = try db.cachedStatement(sql: "DELETE FROM job WHERE id = ?")
                for id in batch.deletions {
                    try attempts.execute(arguments: [id])
                    try jobs.execute(arguments: [id])
                }
            }
        }
    }

    /// Ends every history entry left open by a daemon that stopped or crashed mid-attempt.
    public func closeOpenAttempts(endedAt: String) throws {
        try db.write { db in
            try db.execute(sql: "UPDATE attempt SET endedAt = ? WHERE endedAt IS NULL", arguments: [endedAt])
        }
    }

    private func json<T: Encodable>(_ v: T?) throws -> String? {
        guard let v else { return nil }
        return String(decoding: try encoder.encode(v), as: UTF8.self)
    }

    // MARK: - Settings

    /// The daemon-wide bandwidth limits (none when never set).
    public func limits() throws -> BandwidthLimits {
        try db.read { db in
            var values: [String: String] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT key, value FROM setting WHERE key LIKE 'limit.%'") {
                values[row[0]] = row[1]
            }
            return BandwidthLimits(
                download: values["limit.download"].flatMap { Int64($0) },
                upload: values["limit.upload"].flatMap { Int64($0) },
                schedule: values["limit.schedule"].flatMap { BandwidthSchedule.parse($0) })
        }
    }

    /// Stores the daemon-wide bandwidth limits (in one transaction).
    public func saveLimits(_ limits: BandwidthLimits) throws {
        try db.write { db in
            let values: [(String, String?)] = [
                ("limit.download", limits.download.map(String.init)),
                ("limit.upload", limits.upload.map(String.init)),
                ("limit.schedule", limits.schedule?.text),
            ]
            for (key, value) in values {
                if let value {
                    try db.execute(
                        sql: "INSERT OR REPLACE INTO setting (key, value) VALUES (?, ?)", arguments: [key, value])
                } else {
                    try db.execute(sql: "DELETE FROM setting WHERE key = ?", arguments: [key])
                }
            }
        }
    }

    // MARK: - Reading

    /// One job with its history, or nil.
    public func job(_ id: Int64) throws -> JobRecord? {
        // One statement, so no explicit transaction: `read` wraps each call in statements that
        // GRDB prepares (and authorizes) anew every time.
        try db.inDatabase { db in
            // A cached statement: compiled (and authorized) once, not on every read.
            let statement = try db.cachedStatement(sql: "SELECT * FROM job WHERE id = ?")
            guard var r = try JobRecord.fetchOne(statement, arguments: [id]) else { return nil }
            r.history = try history(db, range: id...id)[id] ?? []
            return r
        }
    }

    /// All jobs with their histories, oldest first, optionally in one state (tests and tools;
    /// the daemon reads pages with ``listings(state:after:limit:)``).
    public func jobs(state: TransferState? = nil) throws -> [JobRecord] {
        try db.read { db in
            var q = JobRecord.order(Column("id"))
            if let state { q = q.filter(Column("state") == state.rawValue) }
            var rows = try q.fetchAll(db)
            let histories = try history(db, range: nil)
            for i in rows.indices { rows[i].history = histories[rows[i].id ?? 0] ?? [] }
            return rows
        }
    }

    /// The scheduling facts of every unfinished (or failed, resumable) job: what the daemon keeps
    /// in memory so that it never reads the database to choose a job or check a destination.
    public func schedulingFacts() throws -> [JobFacts] {
        try db.read { db in
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT id, kind, state, priority, destination, waitReason, nextRetryAt, attempts, retriesUsed,
                           json_extract(request, '$.retries'), durableBytes, finalizing, segments IS NOT NULL
                    FROM job WHERE state IN ('queued', 'running', 'waiting', 'paused', 'failed')
                    """)
            var out: [JobFacts] = []
            while let row = try rows.next() {
                guard let kind = JobKind(rawValue: row[1]), let state = TransferState(rawValue: row[2]) else {
                    continue
                }
                out.append(
                    JobFacts(
                        id: row[0], kind: kind, state: state, priority: row[3], destination: row[4],
                        waitReason: (row[5] as String?).flatMap(WaitReason.init(rawValue:)), nextRetryAt: row[6],
                        attempts: row[7], retriesUsed: row[8], retryLimit: row[9] ?? RetryPolicy.defaultRetryLimit,
                        durableBytes: row[10], finalizing: row[11], segmented: row[12]))
            }
            return out
        }
    }

    /// Up to `limit` jobs with an id above `after`, in id order, optionally in one state, as
    /// listings (what the job object needs), histories included. One index range scan a page.
    public func listings(state: TransferState?, after: Int64?, limit: Int) throws -> [JobListing] {
        try db.inDatabase { db in
            var sql = """
                SELECT id, kind, url, method, state, destination, durableBytes, total, attempts, httpStatus, error,
                       waitReason, nextRetryAt, json_extract(request, '$.insecure'), sha256, createdAt, updatedAt,
                       completedAt, response
                FROM job WHERE id > ?
                """
            var args: [DatabaseValueConvertible?] = [after ?? 0]
            if let state {
                sql += " AND state = ?"
                args.append(state.rawValue)
            }
            sql += " ORDER BY id LIMIT ?"
            args.append(max(0, limit))
            let rows = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: StatementArguments(args))
            var out: [JobListing] = []
            while let row = try rows.next() {
                guard let kind = JobKind(rawValue: row[1]), let st = TransferState(rawValue: row[4]) else { continue }
                let errorText: String? = row[10]
                let responseText: String? = row[18]
                out.append(
                    JobListing(
                        id: row[0], kind: kind, url: row[2], method: row[3], state: st, destination: row[5],
                        durableBytes: row[6], total: row[7], attempts: row[8], httpStatus: row[9],
                        error: try errorText.map { try decoder.decode(TransferError.self, from: Data($0.utf8)) },
                        waitReason: (row[11] as String?).flatMap(WaitReason.init(rawValue:)), nextRetryAt: row[12],
                        insecure: (row[13] as Bool?) ?? false, sha256: row[14], createdAt: row[15], updatedAt: row[16],
                        completedAt: row[17],
                        response: try responseText.map { try decoder.decode(ResponseInfo.self, from: Data($0.utf8)) },
                        history: []))
            }
            guard let first = out.first?.id, let last = out.last?.id else { return out }
            let histories = try history(db, range: first...last)
            for i in out.indices { out[i].history = histories[out[i].id] ?? [] }
            return out
        }
    }

    private func history(_ db: Database, range: ClosedRange<Int64>?) throws -> [Int64: [AttemptRecord]] {
        var sql = """
            SELECT jobId, attempt, startedAt, endedAt, httpStatus, bytes, nameLookup, connect, tls, firstByte, total,
                   error FROM attempt
            """
        var args: [DatabaseValueConvertible?] = []
        if let range {
            sql += " WHERE jobId BETWEEN ? AND ?"
            args = [range.lowerBound, range.upperBound]
        }
        sql += " ORDER BY jobId, seq"
        let rows = try Row.fetchCursor(db.cachedStatement(sql: sql), arguments: StatementArguments(args))
        var out: [Int64: [AttemptRecord]] = [:]
        while let row = try rows.next() {
            let errorText: String? = row[11]
            out[row[0], default: []].append(
                AttemptRecord(
                    attempt: row[1], startedAt: row[2], endedAt: row[3], httpStatus: row[4], bytes: row[5],
                    nameLookup: row[6], connect: row[7], tls: row[8], firstByte: row[9], total: row[10],
                    error: try errorText.map { try decoder.decode(TransferError.self, from: Data($0.utf8)) }))
        }
        return out
    }

    /// Counts jobs per state (every state present).
    public func counts() throws -> [TransferState: Int] {
        try db.read { db in
            var out: [TransferState: Int] = [:]
            for s in TransferState.allCases { out[s] = 0 }
            let rows = try Row.fetchAll(db, sql: "SELECT state, COUNT(*) FROM job GROUP BY state")
            for row in rows {
                if let s = (row[0] as String?).flatMap(TransferState.init(rawValue:)) { out[s] = row[1] }
            }
            return out
        }
    }
}
