import GRDB

/// The store's schema, as append-only migrations: never edit a registered migration, add one.
/// Every released schema is kept as a fixture in `Tests/TransferCoreTests/Fixtures`.
enum Migrations {
    /// All migrations, oldest first.
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
        m.registerMigration("v3") { db in
            // The attempt history gets its own table: an attempt is appended or updated alone,
            // instead of rewriting a JSON array in the job's row on every change. Existing
            // histories are moved over; the old column stays (append-only) and is emptied.
            try db.execute(
                sql: """
                    CREATE TABLE attempt (
                        jobId INTEGER NOT NULL,
                        seq INTEGER NOT NULL,
                        attempt INTEGER NOT NULL,
                        startedAt TEXT NOT NULL,
                        endedAt TEXT,
                        httpStatus INTEGER,
                        bytes INTEGER NOT NULL DEFAULT 0,
                        nameLookup REAL, connect REAL, tls REAL, firstByte REAL, total REAL,
                        error TEXT,
                        PRIMARY KEY (jobId, seq)
                    ) WITHOUT ROWID;
                    INSERT INTO attempt (jobId, seq, attempt, startedAt, endedAt, httpStatus, bytes,
                                         nameLookup, connect, tls, firstByte, total, error)
                    SELECT job.id, CAST(e.key AS INTEGER),
                           COALESCE(json_extract(e.value, '$.attempt'), 0),
                           COALESCE(json_extract(e.value, '$.startedAt'), ''),
                           json_extract(e.value, '$.endedAt'), json_extract(e.value, '$.httpStatus'),
                           COALESCE(json_extract(e.value, '$.bytes'), 0),
                           json_extract(e.value, '$.nameLookup'), json_extract(e.value, '$.connect'),
                           json_extract(e.value, '$.tls'), json_extract(e.value, '$.firstByte'),
                           json_extract(e.value, '$.total'),
                           CASE WHEN json_type(e.value, '$.error') = 'object'
                                THEN json_extract(e.value, '$.error') END
                    FROM job, json_each(job.history) AS e;
                    UPDATE job SET history = '[]' WHERE history <> '[]';
                    -- The unfinished jobs are read once at start (the daemon's in-memory queue).
                    CREATE INDEX job_unfinished ON job(state, priority, id);
                    """)
        }
        m.registerMigration("v4-resumable") { db in
            // Resumable uploads: the upload URL the server gave, the protocol it agreed to and
            // the largest append it takes. The acknowledged offset is `durableBytes`.
            try db.alter(table: "job") { t in
                t.add(column: "uploadUrl", .text)
                t.add(column: "resumable", .text)
                t.add(column: "appendLimit", .integer)
            }
        }
        m.registerMigration("v5-segments-limits") { db in
            // Daemon-wide settings (the bandwidth limits), one value a key; and a segmented
            // download's ranges with their durable offsets (JSON, ``SegmentPlan``).
            try db.execute(
                sql: """
                    CREATE TABLE setting (key TEXT PRIMARY KEY NOT NULL, value TEXT NOT NULL) WITHOUT ROWID;
                    ALTER TABLE job ADD COLUMN segments TEXT;
                    """)
        }
        m.registerMigration("v6-hooks") { db in
            // `--on-end` hooks: the hook still to run for a job's last ending (recorded in the
            // ending's transaction, cleared when it finished) and its result.
            try db.execute(
                sql: """
                    ALTER TABLE job ADD COLUMN hookPending INTEGER;
                    ALTER TABLE job ADD COLUMN hook TEXT;
                    CREATE INDEX job_hook_pending ON job(hookPending) WHERE hookPending IS NOT NULL;
                    """)
        }
        m.registerMigration("v7-removed-hooks") { db in
            // The hooks still owed to jobs that `remove` deleted (since v8 in `owed_hook`,
            // ``OwedHook``): written in the removal's transaction, deleted when the ending's last
            // hook finished.
            try db.execute(
                sql: """
                    CREATE TABLE removed_hook (
                        jobId INTEGER PRIMARY KEY NOT NULL,
                        stage INTEGER NOT NULL,
                        state TEXT NOT NULL,
                        destination TEXT,
                        onEnd TEXT,
                        job TEXT NOT NULL
                    );
                    """)
        }
        m.registerMigration("v8-owed-hooks") { db in
            // A job may owe hooks to several endings (``OwedHook``): one it left by a retry while
            // that ending's hook had not finished, besides one a removal left. Each record has an
            // id of its own; the removed jobs' records move over, in their order.
            try db.execute(
                sql: """
                    CREATE TABLE owed_hook (
                        id INTEGER PRIMARY KEY NOT NULL,
                        jobId INTEGER NOT NULL,
                        stage INTEGER NOT NULL,
                        state TEXT NOT NULL,
                        destination TEXT,
                        onEnd TEXT,
                        job TEXT NOT NULL
                    );
                    INSERT INTO owed_hook (jobId, stage, state, destination, onEnd, job)
                        SELECT jobId, stage, state, destination, onEnd, job FROM removed_hook ORDER BY jobId;
                    DROP TABLE removed_hook;
                    """)
        }
        m.registerMigration("v9-one-state-index") { db in
            // `job_unfinished` (v3) served no query: SQLite answers the start's unfinished jobs,
            // `list --state` and the counts from `job_on_state` (a state, then ids in order), while
            // every insert and every change of state or priority also rewrote this one.
            try db.execute(sql: "DROP INDEX IF EXISTS job_unfinished")
        }
        m.registerMigration("v10-doomed-parts") { db in
            // Part files a cancel or a remove deletes once its rows are written (``DoomedPart``):
            // a crash in between leaves them listed here for the next start.
            try db.execute(
                sql: """
                    CREATE TABLE doomed_part (
                        path TEXT PRIMARY KEY NOT NULL,
                        destination TEXT NOT NULL
                    ) WITHOUT ROWID;
                    """)
        }
        return m
    }
}
