import Foundation
import GRDB

/// The SQLite job store: WAL mode, append-only migrations (``Migrations``), group commit of the
/// changes of one loop pass (``commit(_:now:)``) with cached statements that write only the
/// columns that changed, and the attempt history in its own table.
/// Loop-thread only (GRDB's queue makes each call synchronous on the caller's thread).
public final class JobStore {
    private let db: DatabaseQueue
    /// The database file's path.
    public let path: String
    private let decoder = JSONValueDecoder()

    /// Opens (creating if needed) the database at `path` and migrates it. An existing file is
    /// first looked at read-only (``inspect(path:)``): a damaged one, or one from a newer version,
    /// is refused before anything could write to it.
    /// - Throws: ``StoreOpenError``, or GRDB's error.
    public init(path: String) throws {
        try Self.inspect(path: path)
        self.path = path
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
        try db.inDatabase { db in try Self.createStagingTable(db) }
    }

    /// Closes the connection (SQLite checkpoints the log into the database then). The daemon
    /// closes it before it releases the home's lock: a daemon started the moment the lock is free
    /// found the database still locked by this one's last checkpoint, and exited 1 (found by an
    /// outside audit). Calls after it fail.
    public func closeConnection() {
        do { try db.close() } catch { Log.info("closing the job database: \(error)") }
    }

    /// The first bytes of every SQLite 3 database file.
    private static let header = Array("SQLite format 3\0".utf8)

    /// Refuses an existing database that this daemon must not write to: not SQLite, damaged
    /// (`PRAGMA quick_check`), or written by a newer version (a migration this one does not know,
    /// or a `user_version`, which no version so far sets). Read-only: the file is left as it is.
    /// A missing or empty file passes (a new database is created).
    /// - Throws: ``StoreOpenError``.
    public static func inspect(path: String) throws {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return }
            throw StoreOpenError.unreadable(String(cString: strerror(errno)))
        }
        var head = [UInt8](repeating: 0, count: header.count)
        let n = read(fd, &head, head.count)
        let readErrno = errno
        close(fd)
        if n == 0 { return }
        if n < 0 { throw StoreOpenError.unreadable(String(cString: strerror(readErrno))) }
        guard n == header.count, head == header else { throw StoreOpenError.notADatabase }
        var config = Configuration()
        config.readonly = true
        config.label = "aftransfer.inspect"
        let reader: DatabaseQueue
        do {
            reader = try DatabaseQueue(path: path, configuration: config)
        } catch {
            throw StoreOpenError.unreadable("\(error)")
        }
        defer { try? reader.close() }
        try reader.read { db in
            do {
                let check = try String.fetchAll(db, sql: "PRAGMA quick_check(1)")
                if check != ["ok"] { throw StoreOpenError.corrupt(check.first ?? "unknown damage") }
                let version = try Int.fetchOne(db, sql: "PRAGMA user_version") ?? 0
                if version != 0 { throw StoreOpenError.newerVersion("user_version \(version)") }
                let migrator = Migrations.migrator
                if try migrator.hasBeenSuperseded(db) {
                    let known = Set(migrator.migrations)
                    let unknown = try migrator.appliedIdentifiers(db).subtracting(known).sorted()
                    throw StoreOpenError.newerVersion("migrations \(unknown.joined(separator: ", "))")
                }
            } catch let e as StoreOpenError {
                throw e
            } catch let e as DatabaseError {
                switch e.resultCode {
                case .SQLITE_CORRUPT, .SQLITE_NOTADB: throw StoreOpenError.corrupt(e.message ?? "\(e)")
                default: throw StoreOpenError.unreadable(e.message ?? "\(e)")
                }
            }
        }
    }

    /// Whether a store error means the database's file system is full (`SQLITE_FULL`).
    public static func isDiskFull(_ error: Error) -> Bool {
        guard let e = error as? DatabaseError else { return false }
        return e.resultCode == .SQLITE_FULL
    }

    /// Copies the write-ahead log into the database and cuts it to nothing
    /// (`PRAGMA wal_checkpoint(TRUNCATE)`): on a full disk, the log would otherwise grow by every
    /// commit (about 36 KiB for a small file's) until the next automatic checkpoint, 4 MiB away.
    public func truncateWAL() throws {
        try db.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA wal_checkpoint(TRUNCATE)") }
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
            let statement = try db.cachedStatement(sql: Self.insertSQL(into: "main.job", extra: nil))
            for i in records.indices {
                try statement.run(try insertValues(records[i]))
                records[i].id = db.lastInsertedRowID
            }
        }
    }

    /// The columns a new job's row is written with (``insertValues(_:)`` gives their values, in
    /// this order); the others take their defaults.
    private static let insertColumns = [
        "kind", "url", "method", "state", "request", "destination", "durableBytes", "total", "etag", "lastModified",
        "attempts", "retriesUsed", "httpStatus", "error", "waitReason", "nextRetryAt", "priority", "finalizing",
        "sha256", "sourceSize", "sourceMtime", "response", "createdAt", "updatedAt", "completedAt", "sources",
        "uploadUrl", "resumable", "appendLimit",
    ]

    /// The values of ``insertColumns``, as `DatabaseValue`s: an array of existentials
    /// (`DatabaseValueConvertible?`) made GRDB box and unbox each one, a third of staging a batch.
    private func insertValues(_ r: JobRecord) throws -> [DatabaseValue] {
        func v<T: DatabaseValueConvertible>(_ value: T?) -> DatabaseValue { value?.databaseValue ?? .null }
        return [
            v(r.kind.rawValue), v(r.url), v(r.method), v(r.state.rawValue), v(Self.json(r.request)), v(r.destination),
            v(r.durableBytes), v(r.total), v(r.etag), v(r.lastModified), v(r.attempts), v(r.retriesUsed),
            v(r.httpStatus), v(try json(r.error)), v(r.waitReason?.rawValue), v(r.nextRetryAt), v(r.priority),
            v(r.finalizing), v(r.sha256), v(r.sourceSize), v(r.sourceMtime), v(try json(r.response)), v(r.createdAt),
            v(r.updatedAt), v(r.completedAt), v(try json(r.sources)), v(r.uploadUrl), v(r.resumable?.rawValue),
            v(r.appendLimit),
        ]
    }

    private static func insertSQL(into table: String, extra: String?) -> String {
        let columns = insertColumns + (extra.map { [$0] } ?? [])
        return "INSERT INTO \(table) (\(columns.joined(separator: ", "))) VALUES ("
            + Array(repeating: "?", count: columns.count).joined(separator: ", ") + ")"
    }

    // MARK: - Batches being assembled

    /// The rows of `transfer.addMany` batches sent in parts, held until their final part in a
    /// TEMP table: in SQLite's temporary file (never synced), private to this connection, and gone
    /// when the daemon stops — as a batch is when its connection closes. So a batch of 100,000
    /// jobs is not held in memory until it is queued (SPEC "Scale").
    private static func createStagingTable(_ db: Database) throws {
        let columns = insertColumns.joined(separator: ", ")
        try db.execute(
            sql: """
                CREATE TEMP TABLE IF NOT EXISTS staged_job AS SELECT \(columns) FROM main.job WHERE 0;
                ALTER TABLE temp.staged_job ADD COLUMN batchKey TEXT;
                CREATE INDEX IF NOT EXISTS temp.staged_job_batch ON staged_job (batchKey);
                """)
    }

    /// Holds new jobs' rows for batch `key`, after those already held, in one transaction.
    public func stage(_ records: [JobRecord], batch key: String) throws {
        try db.write { db in
            let statement = try db.cachedStatement(sql: Self.insertSQL(into: "temp.staged_job", extra: "batchKey"))
            for r in records {
                try statement.run(try insertValues(r) + [key.databaseValue])
            }
        }
    }

    /// Forgets the rows held for batch `key`.
    public func discardStaged(batch key: String) throws {
        try db.write { db in
            try db.execute(sql: "DELETE FROM temp.staged_job WHERE batchKey = ?", arguments: [key])
        }
    }

    /// Inserts the rows held for batch `key` as new jobs, in the order they were held, and forgets
    /// them: one transaction, all or none. The ids are consecutive (one statement on a table whose
    /// ids only grow).
    /// - Returns: the new jobs' ids, or nil when nothing was held.
    public func insertStaged(batch key: String, now: Double) throws -> ClosedRange<Int64>? {
        try db.write { db in
            let columns = Self.insertColumns.joined(separator: ", ")
            // Created when queued, now, not when its part arrived: `createdAt` follows the ids.
            let values = Self.insertColumns.map { $0 == "createdAt" || $0 == "updatedAt" ? "?" : $0 }
                .joined(separator: ", ")
            try db.execute(
                sql: """
                    INSERT INTO main.job (\(columns))
                    SELECT \(values) FROM temp.staged_job WHERE batchKey = ? ORDER BY rowid
                    """, arguments: [now, now, key])
            let count = Int64(db.changesCount)
            let last = db.lastInsertedRowID
            try db.execute(sql: "DELETE FROM temp.staged_job WHERE batchKey = ?", arguments: [key])
            return count > 0 ? (last - count + 1)...last : nil
        }
    }

    /// Inserts one new job and returns it with its id.
    public func insert(_ record: JobRecord) throws -> JobRecord {
        try insert([record])[0]
    }

    /// Writes a batch in one transaction: column-level updates, history entries, deletions.
    /// A changed job's `updatedAt` is when the batch says it changed, else `now`.
    public func commit(_ batch: WriteBatch, now: Double) throws {
        guard !batch.isEmpty else { return }
        try transaction { db in
            for (id, patch) in batch.patches {
                var columns = ColumnSet()
                var values: [DatabaseValue] = []
                values.reserveCapacity(8)
                func set<T: DatabaseValueConvertible>(_ column: PatchColumn, _ v: T?) {
                    columns.insert(column)
                    values.append(v?.databaseValue ?? .null)
                }
                if let v = patch.state { set(.state, v.rawValue) }
                if let v = patch.url { set(.url, v) }
                if let v = patch.destination { set(.destination, v) }
                if let v = patch.durableBytes { set(.durableBytes, v) }
                if let v = patch.total { set(.total, v) }
                if let v = patch.etag { set(.etag, v) }
                if let v = patch.lastModified { set(.lastModified, v) }
                if let v = patch.attempts { set(.attempts, v) }
                if let v = patch.retriesUsed { set(.retriesUsed, v) }
                if let v = patch.httpStatus { set(.httpStatus, v) }
                if let v = patch.error { set(.error, try json(v)) }
                if let v = patch.waitReason { set(.waitReason, v?.rawValue) }
                if let v = patch.nextRetryAt { set(.nextRetryAt, v) }
                if let v = patch.finalizing { set(.finalizing, v) }
                if let v = patch.sha256 { set(.sha256, v) }
                if let v = patch.response { set(.response, try json(v)) }
                if let v = patch.completedAt { set(.completedAt, v) }
                if let v = patch.uploadUrl { set(.uploadUrl, v) }
                if let v = patch.resumable { set(.resumable, v?.rawValue) }
                if let v = patch.appendLimit { set(.appendLimit, v) }
                if let v = patch.hookPending { set(.hookPending, v?.rawValue) }
                if let v = patch.hook { set(.hook, try json(v)) }
                if let v = patch.segments { set(.segments, v) }
                set(.updatedAt, batch.changedAt[id] ?? now)
                values.append(id.databaseValue)
                try db.cachedStatement(sql: updateSQL(columns)).run(values)
            }
            if !batch.attempts.isEmpty {
                let statement = try db.cachedStatement(
                    sql: """
                        INSERT OR REPLACE INTO attempt (jobId, seq, attempt, startedAt, endedAt, httpStatus, bytes,
                            nameLookup, connect, tls, firstByte, total, error)
                        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """)
                func v<T: DatabaseValueConvertible>(_ value: T?) -> DatabaseValue { value?.databaseValue ?? .null }
                for (key, a) in batch.attempts {
                    try statement.run([
                        v(key.jobId), v(key.seq), v(a.attempt), v(a.startedAt), v(a.endedAt), v(a.httpStatus),
                        v(a.bytes), v(a.nameLookup), v(a.connect), v(a.tls), v(a.firstByte), v(a.total),
                        v(try json(a.error)),
                    ])
                }
            }
            for h in batch.owedHooks.values {
                // Before the deletion of its job below: one transaction, so never one without the other.
                try db.cachedStatement(
                    sql: """
                        INSERT OR REPLACE INTO owed_hook (id, jobId, stage, state, destination, onEnd, job)
                        VALUES (?, ?, ?, ?, ?, ?, ?)
                        """
                ).run([
                    h.id.databaseValue, h.jobId.databaseValue, h.stage.rawValue.databaseValue,
                    h.state.rawValue.databaseValue, h.destination?.databaseValue ?? .null,
                    h.onEnd?.databaseValue ?? .null, h.job.databaseValue,
                ])
            }
            if !batch.finishedOwedHooks.isEmpty {
                let statement = try db.cachedStatement(sql: "DELETE FROM owed_hook WHERE id = ?")
                for id in batch.finishedOwedHooks { try statement.run([id.databaseValue]) }
            }
            if !batch.doomedParts.isEmpty {
                let statement = try db.cachedStatement(
                    sql: "INSERT OR REPLACE INTO doomed_part (path, destination) VALUES (?, ?)")
                for part in batch.doomedParts.values {
                    try statement.run([part.path.databaseValue, part.destination.databaseValue])
                }
            }
            if !batch.deletedParts.isEmpty {
                let statement = try db.cachedStatement(sql: "DELETE FROM doomed_part WHERE path = ?")
                for path in batch.deletedParts { try statement.run([path.databaseValue]) }
            }
            if !batch.deletions.isEmpty {
                let attempts = try db.cachedStatement(sql: "DELETE FROM attempt WHERE jobId = ?")
                let jobs = try db.cachedStatement(sql: "DELETE FROM job WHERE id = ?")
                for id in batch.deletions {
                    try attempts.run([id.databaseValue])
                    try jobs.run([id.databaseValue])
                }
            }
        }
    }

    /// Runs `body` in one immediate transaction whose `BEGIN` and `COMMIT` are cached statements
    /// run straight through SQLite: GRDB's `write` prepares both afresh from SQL text on every
    /// call, a sixth of the group commit that every loop pass makes with thousands of small files.
    /// On an error the transaction is rolled back and the error thrown, as `write` does.
    private func transaction(_ body: (Database) throws -> Void) throws {
        try db.writeWithoutTransaction { db in
            try db.cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").run([])
            do {
                try body(db)
                try db.cachedStatement(sql: "COMMIT TRANSACTION").run([])
            } catch {
                if db.isInsideTransaction { try? db.rollback() }
                throw error
            }
        }
    }

    /// The part files a cancel or a remove recorded for deletion and that may still be there.
    public func doomedParts() throws -> [DoomedPart] {
        try db.read { db in
            try Row.fetchAll(db, sql: "SELECT path, destination FROM doomed_part ORDER BY path").map {
                DoomedPart(path: $0[0], destination: $0[1])
            }
        }
    }

    /// Ends every history entry left open by a daemon that crashed mid-attempt, at its job's last
    /// recorded change (the attempt's last checkpoint: the daemon went away after it), or at
    /// `fallback` (seconds since 1970) for an entry without a job. `completed` names jobs whose
    /// file recovery found in place, with its size: their open attempt moved all of it.
    public func closeOpenAttempts(fallback: Double, completed: [Int64: Int64] = [:]) throws {
        try db.write { db in
            let open = try Row.fetchAll(
                db,
                sql: """
                    SELECT attempt.jobId, attempt.seq, job.updatedAt FROM attempt
                    LEFT JOIN job ON job.id = attempt.jobId WHERE attempt.endedAt IS NULL
                    """)
            let statement = try db.cachedStatement(sql: "UPDATE attempt SET endedAt = ? WHERE jobId = ? AND seq = ?")
            let whole = try db.cachedStatement(
                sql: "UPDATE attempt SET endedAt = ?, bytes = ? WHERE jobId = ? AND seq = ?")
            for row in open {
                let at: Double = row[2] ?? fallback
                let jobId: Int64 = row[0]
                let seq: Int64 = row[1]
                if let size = completed[jobId] {
                    try whole.run([
                        Timestamp.rfc3339(at).databaseValue, size.databaseValue, jobId.databaseValue, seq.databaseValue,
                    ])
                } else {
                    try statement.run([Timestamp.rfc3339(at).databaseValue, jobId.databaseValue, seq.databaseValue])
                }
            }
        }
    }

    /// A nested value as JSON text (sorted keys), written without `JSONEncoder`: encoding every new
    /// job's request with it was a tenth of queuing 100,000 jobs.
    /// A request as the `request` column holds it (sorted keys, written directly).
    static func json(_ request: TransferRequest) -> String {
        var writer = JobJSONWriter(capacity: 256)
        writer.write(request)
        return String(decoding: writer.bytes, as: UTF8.self)
    }

    private func json<T: Encodable>(_ v: T?) throws -> String? {
        guard let v else { return nil }
        return String(decoding: try JobJSONWriter.json(v), as: UTF8.self)
    }

    /// A column a ``JobPatch`` may change, in the order the `UPDATE` sets them.
    enum PatchColumn: Int, CaseIterable {
        case state, url, destination, durableBytes, total, etag, lastModified, attempts, retriesUsed
        case httpStatus, error, waitReason, nextRetryAt, finalizing, sha256, response, completedAt
        case uploadUrl, resumable, appendLimit, hookPending, hook, segments, updatedAt
    }

    /// The columns one `UPDATE` sets, as bits of ``PatchColumn`` raw values.
    struct ColumnSet: Hashable {
        var bits: UInt32 = 0
        mutating func insert(_ column: PatchColumn) { bits |= 1 << UInt32(column.rawValue) }
        func contains(_ column: PatchColumn) -> Bool { bits & (1 << UInt32(column.rawValue)) != 0 }
    }

    /// The `UPDATE` text for each set of columns seen: built once, not joined again for every
    /// changed job (that was a tenth of the group commit with thousands of small files).
    private var updateSQLs: [ColumnSet: String] = [:]

    private func updateSQL(_ columns: ColumnSet) -> String {
        if let sql = updateSQLs[columns] { return sql }
        let names = PatchColumn.allCases.filter { columns.contains($0) }.map { "\($0) = ?" }
        let sql = "UPDATE job SET " + names.joined(separator: ", ") + " WHERE id = ?"
        updateSQLs[columns] = sql
        return sql
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
            let statement = try db.cachedStatement(sql: "SELECT \(JobRecord.selection) FROM job WHERE id = ?")
            guard var r = try JobRecord.fetchOne(statement, arguments: [id]) else { return nil }
            r.history = try history(db, range: id...id)[id] ?? []
            return r
        }
    }

    /// All jobs with their histories, oldest first, optionally in one state (tests and tools;
    /// the daemon reads pages with ``listings(state:after:limit:)``).
    public func jobs(state: TransferState? = nil) throws -> [JobRecord] {
        try db.read { db in
            var sql = "SELECT \(JobRecord.selection) FROM job"
            var args: StatementArguments = []
            if let state {
                sql += " WHERE state = ?"
                args = [state.rawValue]
            }
            var rows = try JobRecord.fetchAll(db, sql: sql + " ORDER BY id", arguments: args)
            let histories = try history(db, range: nil)
            for i in rows.indices { rows[i].history = histories[rows[i].id ?? 0] ?? [] }
            return rows
        }
    }

    /// The scheduling facts of every unfinished (or failed, resumable) job: what the daemon keeps
    /// in memory so that it never reads the database to choose a job or check a destination.
    /// - Parameter ids: only the jobs in this range (new jobs), or nil for all.
    public func schedulingFacts(ids: ClosedRange<Int64>? = nil) throws -> [JobFacts] {
        try db.read { db in
            let rows = try Row.fetchCursor(
                db,
                sql: """
                    SELECT id, kind, state, priority, destination, waitReason, nextRetryAt, attempts, retriesUsed,
                           json_extract(request, '$.retries'), durableBytes, finalizing,
                           json_extract(request, '$.onEnd') IS NOT NULL, segments IS NOT NULL, hookPending,
                           CASE kind WHEN 'upload' THEN json_extract(request, '$.response') END
                    FROM job WHERE state IN ('queued', 'running', 'waiting', 'paused', 'failed')
                      AND id BETWEEN ? AND ?
                    """, arguments: [ids?.lowerBound ?? Int64.min, ids?.upperBound ?? Int64.max])
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
                        durableBytes: row[10], finalizing: row[11], hasOnEnd: row[12], segmented: row[13],
                        hookPending: (row[14] as Int?).flatMap(HookStage.init(rawValue:)), responseFile: row[15]))
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
                       completedAt, response, uploadUrl, resumable, hook
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
                let hookText: String? = row[21]
                out.append(
                    JobListing(
                        id: row[0], kind: kind, url: row[2], method: row[3], state: st, destination: row[5],
                        durableBytes: row[6], total: row[7], attempts: row[8], httpStatus: row[9],
                        error: try errorText.map { try decoder.decode(TransferError.self, fromJSON: $0) },
                        waitReason: (row[11] as String?).flatMap(WaitReason.init(rawValue:)), nextRetryAt: row[12],
                        insecure: (row[13] as Bool?) ?? false, sha256: row[14], createdAt: row[15], updatedAt: row[16],
                        completedAt: row[17],
                        response: try responseText.map { try decoder.decode(ResponseInfo.self, fromJSON: $0) },
                        history: [], uploadUrl: row[19],
                        resumable: (row[20] as String?).flatMap(ResumableProtocol.init(rawValue:)),
                        hook: try hookText.map { try decoder.decode(HookResult.self, fromJSON: $0) }))
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
                    error: try errorText.map { try decoder.decode(TransferError.self, fromJSON: $0) }))
        }
        return out
    }

    /// The jobs whose last ending still has a hook to run, with the stage, in id order: what a
    /// daemon that stopped or crashed left (the partial index `job_hook_pending` keeps it cheap).
    public func pendingHooks() throws -> [(id: Int64, stage: HookStage)] {
        try db.read { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT id, hookPending FROM job WHERE hookPending IS NOT NULL ORDER BY id")
            return rows.compactMap { row in
                (row[1] as Int?).flatMap(HookStage.init(rawValue:)).map { (id: row[0], stage: $0) }
            }
        }
    }

    /// The hooks still owed to endings that jobs left (``OwedHook``), in the order they were
    /// owed: what a daemon that stopped or crashed before they finished left.
    public func owedHooks() throws -> [OwedHook] {
        try db.read { db in
            let rows = try Row.fetchAll(
                db, sql: "SELECT id, jobId, stage, state, destination, onEnd, job FROM owed_hook ORDER BY id")
            return rows.compactMap { row in
                guard let stage = (row[2] as Int?).flatMap(HookStage.init(rawValue:)),
                    let state = (row[3] as String?).flatMap(TransferState.init(rawValue:))
                else { return nil }
                return OwedHook(
                    id: row[0], jobId: row[1], stage: stage, state: state, destination: row[4], onEnd: row[5],
                    job: row[6])
            }
        }
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
