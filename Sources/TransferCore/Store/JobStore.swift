import Foundation
import GRDB

/// The SQLite job store: WAL mode, append-only migrations, one transaction per state change.
/// Loop-thread only (GRDB's queue makes each call synchronous on the caller's thread of control).
public final class JobStore {
    private let db: DatabaseQueue

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
        try Self.migrator.migrate(db)
    }

    /// Append-only: never edit a registered migration, add a new one.
    static var migrator: DatabaseMigrator {
        var m = DatabaseMigrator()
        m.registerMigration("v1") { db in
            try db.create(table: "job") { t in
                t.autoIncrementedPrimaryKey("id")
                t.column("kind", .text).notNull()
                t.column("url", .text).notNull()
                t.column("method", .text).notNull()
                t.column("state", .text).notNull().indexed()
                t.column("request", .text).notNull()
                t.column("destination", .text)
                t.column("durableBytes", .integer).notNull().defaults(to: 0)
                t.column("total", .integer)
                t.column("etag", .text)
                t.column("lastModified", .text)
                t.column("attempts", .integer).notNull().defaults(to: 0)
                t.column("retriesUsed", .integer).notNull().defaults(to: 0)
                t.column("httpStatus", .integer)
                t.column("error", .text)
                t.column("waitReason", .text)
                t.column("nextRetryAt", .double)
                t.column("priority", .integer).notNull().defaults(to: 0)
                t.column("finalizing", .boolean).notNull().defaults(to: false)
                t.column("sha256", .text)
                t.column("sourceSize", .integer)
                t.column("sourceMtime", .double)
                t.column("response", .text)
                t.column("history", .text).notNull().defaults(to: "[]")
                t.column("createdAt", .double).notNull()
                t.column("updatedAt", .double).notNull()
                t.column("completedAt", .double)
            }
        }
        m.registerMigration("v2") { db in
            // Per-file source stamps for uploads (a form's files are checked one by one).
            try db.alter(table: "job") { t in t.add(column: "sources", .text) }
        }
        return m
    }

    /// Inserts a new job and returns it with its id.
    public func insert(_ record: JobRecord) throws -> JobRecord {
        try db.write { db in
            var r = record
            try r.insert(db)
            return r
        }
    }

    /// One job, or nil.
    public func job(_ id: Int64) throws -> JobRecord? {
        try db.read { db in try JobRecord.fetchOne(db, key: id) }
    }

    /// All jobs, oldest first, optionally in one state.
    public func jobs(state: TransferState? = nil) throws -> [JobRecord] {
        try db.read { db in
            var q = JobRecord.order(Column("id"))
            if let state { q = q.filter(Column("state") == state.rawValue) }
            return try q.fetchAll(db)
        }
    }

    /// Jobs in any of `states`, in scheduling order (priority first, then oldest).
    public func jobs(inStates states: [TransferState]) throws -> [JobRecord] {
        try db.read { db in
            try JobRecord
                .filter(states.map(\.rawValue).contains(Column("state")))
                .order(Column("priority").desc, Column("id"))
                .fetchAll(db)
        }
    }

    /// Reads, changes and writes one job in a single transaction; returns the new row, or nil if
    /// the job no longer exists.
    @discardableResult
    public func update(_ id: Int64, _ change: (inout JobRecord) throws -> Void) throws -> JobRecord? {
        try db.write { db in
            guard var r = try JobRecord.fetchOne(db, key: id) else { return nil }
            try change(&r)
            r.updatedAt = Date().timeIntervalSince1970
            try r.update(db)
            return r
        }
    }

    /// Deletes a job row.
    public func delete(_ id: Int64) throws {
        _ = try db.write { db in try JobRecord.deleteOne(db, key: id) }
    }

    /// Counts jobs per state.
    public func counts() throws -> [String: Int] {
        try db.read { db in
            var out: [String: Int] = [:]
            for s in TransferState.allCases { out[s.rawValue] = 0 }
            let rows = try Row.fetchAll(db, sql: "SELECT state, COUNT(*) AS n FROM job GROUP BY state")
            for row in rows {
                if let s: String = row["state"], let n: Int = row["n"] { out[s] = n }
            }
            return out
        }
    }
}
