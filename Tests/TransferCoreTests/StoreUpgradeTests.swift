import Foundation
import GRDB
import XCTest

@testable import TransferBase
@testable import TransferCore

/// `Fixtures/transfers-v1.sqlite` was written by the first released daemon (schema "v1": one
/// completed download, one failed on a 404, one paused with a part and an Authorization header).
/// Every later migration must open it and keep its jobs as they were.
final class StoreUpgradeTests: XCTestCase {
    func testThatADatabaseWrittenByTheFirstDaemonOpensWithItsJobsIntact() throws {
        let fixture = try XCTUnwrap(
            Bundle.module.url(forResource: "transfers-v1", withExtension: "sqlite", subdirectory: "Fixtures"))
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("aft-upgrade-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let copy = dir.appendingPathComponent("transfers.sqlite")
        try FileManager.default.copyItem(at: fixture, to: copy)

        let store = try JobStore(path: copy.path)
        let jobs = try store.jobs()
        XCTAssertEqual(jobs.map(\.state), [.completed, .failed, .paused])
        XCTAssertEqual(jobs[0].sha256?.count, 64)
        XCTAssertEqual(jobs[1].error?.code, .httpStatus)
        XCTAssertEqual(jobs[1].httpStatus, 404)
        XCTAssertGreaterThan(jobs[2].durableBytes, 0)
        XCTAssertEqual(jobs[2].request.headers, ["Authorization: Bearer x"])
        XCTAssertFalse(jobs[0].history.isEmpty)
        // Migration v2 added per-file source stamps: old rows have none.
        XCTAssertNil(jobs[2].sources)
    }

    /// `Fixtures/transfers-v2.sqlite` was written by the daemon of schema "v2" (histories as a
    /// JSON column): a completed download, a 404, a failed upload with its response, a completed
    /// download of priority -5 and a paused one of priority 3 that waited on a retry timer.
    /// Migration v3 moves every history entry to the `attempt` table.
    func testThatASchemaV2DatabaseKeepsItsJobsAndHistoriesInTheAttemptTable() throws {
        let copy = try copyFixture("transfers-v2")
        defer { try? FileManager.default.removeItem(at: copy.deletingLastPathComponent()) }
        let before = try rawHistories(copy.path)
        let store = try JobStore(path: copy.path)
        let jobs = try store.jobs()
        XCTAssertEqual(jobs.map(\.state), [.completed, .failed, .failed, .completed, .paused])
        XCTAssertEqual(jobs.map(\.kind), [.download, .download, .upload, .download, .download])
        XCTAssertEqual(jobs[1].httpStatus, 404)
        XCTAssertEqual(jobs[1].request.headers, ["Authorization: Bearer x"])
        XCTAssertEqual(jobs[2].response?.status, 501)
        XCTAssertEqual(jobs[4].priority, 3)
        XCTAssertNil(jobs[4].waitReason)
        for (job, count) in zip(jobs, before) {
            XCTAssertEqual(job.history.count, count, "history of job \(job.id ?? 0)")
        }
        XCTAssertEqual(jobs[0].history.first?.httpStatus, 200)
        XCTAssertEqual(jobs[1].history.first?.error?.code, .httpStatus)
        XCTAssertGreaterThan(jobs[4].history.count, 1)
        XCTAssertEqual(try store.schedulingFacts().map(\.id).sorted(), [2, 3, 5])
        let page = try store.listings(state: nil, after: nil, limit: 10)
        XCTAssertEqual(page.map(\.history), jobs.map(\.history))
    }

    /// `Fixtures/transfers-v3.sqlite` was written by the rebuilt engine (schema "v3": histories in
    /// the `attempt` table): a completed download, a 404, a failed upload with its response, and a
    /// paused download of priority 3 with three attempts. Later migrations must keep them.
    func testThatASchemaV3DatabaseOpensWithItsJobsAndAttempts() throws {
        let copy = try copyFixture("transfers-v3")
        defer { try? FileManager.default.removeItem(at: copy.deletingLastPathComponent()) }
        let store = try JobStore(path: copy.path)
        let jobs = try store.jobs()
        XCTAssertEqual(jobs.map(\.state), [.completed, .failed, .failed, .paused])
        XCTAssertEqual(jobs.map { $0.history.count }, [1, 1, 1, 3])
        XCTAssertEqual(jobs[0].history[0].httpStatus, 200)
        XCTAssertEqual(jobs[2].response?.status, 501)
        XCTAssertEqual(jobs[3].history.map(\.attempt), [1, 2, 3])
        XCTAssertEqual(jobs[3].error?.code, .network)
        XCTAssertEqual(try store.counts()[.paused], 1)
    }

    /// Migration v4-resumable adds a resumable upload's URL, protocol and append limit: a v3
    /// database upgrades with its jobs as they were and no upload URL, and the new columns are
    /// written and read back.
    func testThatASchemaV3DatabaseUpgradesThroughV4ResumableAndKeepsAnUploadURL() throws {
        let copy = try copyFixture("transfers-v3")
        defer { try? FileManager.default.removeItem(at: copy.deletingLastPathComponent()) }
        let store = try JobStore(path: copy.path)
        let jobs = try store.jobs()
        XCTAssertEqual(jobs.map(\.state), [.completed, .failed, .failed, .paused])
        XCTAssertTrue(jobs.allSatisfy { $0.uploadUrl == nil && $0.resumable == nil && $0.appendLimit == nil })
        let upload = try XCTUnwrap(jobs[2].id)
        var batch = WriteBatch()
        var p = JobPatch()
        p.uploadUrl = .some("http://127.0.0.1:1/res/u1")
        p.resumable = .some(.ietf)
        p.appendLimit = .some(1000)
        p.durableBytes = 500
        batch.patch(upload, p)
        try store.commit(batch, now: 1)
        let again = try XCTUnwrap(try store.job(upload))
        XCTAssertEqual(again.uploadUrl, "http://127.0.0.1:1/res/u1")
        XCTAssertEqual(again.resumable, .ietf)
        XCTAssertEqual(again.appendLimit, 1000)
        XCTAssertEqual(again.durableBytes, 500)
        let listing = try XCTUnwrap(try store.listings(state: nil, after: upload - 1, limit: 1).first)
        XCTAssertEqual(listing.uploadUrl, "http://127.0.0.1:1/res/u1")
        XCTAssertEqual(listing.resumable, .ietf)
        let migrations = try DatabaseQueue(path: copy.path).read { db in
            try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
        }
        XCTAssertTrue(migrations.contains("v4-resumable"))
    }

    /// Migration "v6-hooks" adds `hookPending` and `hook`: a v3 database's jobs have none pending,
    /// and the new columns are written and read back.
    func testThatASchemaV3DatabaseUpgradesThroughV6HooksWithNoHookPending() throws {
        let copy = try copyFixture("transfers-v3")
        defer { try? FileManager.default.removeItem(at: copy.deletingLastPathComponent()) }
        let store = try JobStore(path: copy.path)
        let jobs = try store.jobs()
        XCTAssertEqual(jobs.count, 4)
        XCTAssertTrue(jobs.allSatisfy { $0.hookPending == nil && $0.hook == nil })
        XCTAssertTrue(try store.pendingHooks().isEmpty)
        var batch = WriteBatch()
        var p = JobPatch()
        p.hookPending = .some(.job)
        p.hook = .some(HookResult(exitStatus: 2, output: "é"))
        let id = try XCTUnwrap(jobs[0].id)
        batch.patch(id, p)
        try store.commit(batch, now: 1)
        XCTAssertEqual(try store.pendingHooks().map(\.id), [id])
        XCTAssertEqual(try store.job(id)?.hook, HookResult(exitStatus: 2, output: "é"))
        XCTAssertEqual(try store.listings(state: nil, after: nil, limit: 1).first?.hook?.exitStatus, 2)
        let migrations = try DatabaseQueue(path: copy.path).read { db in
            try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid")
        }
        XCTAssertTrue(migrations.contains("v6-hooks"))
    }

    /// Migration "v7-removed-hooks" added `removed_hook` (since v8 `owed_hook`): a database the v6
    /// daemon wrote (one completed job killed while its hook ran, so the hook is pending; one plain
    /// completed job) opens with its pending hook intact and no owed hook, and takes one in the
    /// same transaction as the removal.
    func testThatASchemaV6DatabaseUpgradesWithItsPendingHookAndNoOwedHooks() throws {
        let copy = try copyFixture("transfers-v6")
        defer { try? FileManager.default.removeItem(at: copy.deletingLastPathComponent()) }
        let store = try JobStore(path: copy.path)
        let jobs = try store.jobs()
        XCTAssertEqual(jobs.map(\.state), [.completed, .completed])
        XCTAssertEqual(jobs.map(\.hookPending), [.job, nil])
        XCTAssertEqual(jobs[0].request.onEnd, "sleep 30")
        XCTAssertEqual(try store.pendingHooks().map(\.id), [1])
        XCTAssertTrue(try store.owedHooks().isEmpty)
        var batch = WriteBatch()
        let kept = OwedHook(
            id: 1, jobId: 1, stage: .job, state: .completed, destination: "/tmp/fx/w/done.bin", onEnd: "sleep 30",
            job: #"{"id":1,"state":"completed"}"#)
        batch.putOwedHook(kept)
        batch.delete(1)
        try store.commit(batch, now: 2)
        XCTAssertNil(try store.job(1))
        XCTAssertEqual(try store.owedHooks(), [kept])
        XCTAssertTrue(try store.pendingHooks().isEmpty)
        var done = WriteBatch()
        done.finishOwedHook(1)
        try store.commit(done, now: 3)
        XCTAssertTrue(try store.owedHooks().isEmpty)
        let migrations = try DatabaseQueue(path: copy.path).read { db in
            try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations ORDER BY rowid")
        }
        XCTAssertEqual(
            migrations.suffix(4), ["v7-removed-hooks", "v8-owed-hooks", "v9-one-state-index", "v10-doomed-parts"])
    }

    /// Migration "v10-doomed-parts": an older database (the v7 daemon's) opens with no doomed part,
    /// and the table then keeps and forgets records.
    func testThatAnOlderDatabaseUpgradesThroughV10WithNoDoomedParts() throws {
        let copy = try copyFixture("transfers-v7")
        defer { try? FileManager.default.removeItem(at: copy.deletingLastPathComponent()) }
        let store = try JobStore(path: copy.path)
        XCTAssertEqual(try store.doomedParts(), [])
        let part = DoomedPart(path: "/tmp/fx/w/a.bin.aftpart", destination: "/tmp/fx/w/a.bin")
        var batch = WriteBatch()
        batch.doom(part)
        try store.commit(batch, now: 2)
        XCTAssertEqual(try store.doomedParts(), [part])
        var gone = WriteBatch()
        gone.partDeleted(part.path)
        try store.commit(gone, now: 3)
        XCTAssertEqual(try store.doomedParts(), [])
        XCTAssertFalse(try store.jobs().isEmpty, "the jobs are still there")
    }

    /// Migration "v8-owed-hooks" moves `removed_hook` into `owed_hook`, where each record has an
    /// id of its own: a database the v7 daemon wrote (two jobs failed with their 30 s hooks
    /// running, the first then removed, then `kill -9`) keeps the removed job's owed hook, as it
    /// was, and the other's pending hook; a job then owes several at once.
    func testThatASchemaV7DatabaseUpgradesWithItsRemovedJobsHookOwedAndAJobMayOweSeveral() throws {
        let copy = try copyFixture("transfers-v7")
        defer { try? FileManager.default.removeItem(at: copy.deletingLastPathComponent()) }
        let store = try JobStore(path: copy.path)
        XCTAssertEqual(try store.jobs().map(\.id), [2])
        XCTAssertEqual(try store.pendingHooks().map(\.id), [2])
        let owed = try store.owedHooks()
        XCTAssertEqual(owed.count, 1)
        let removed = try XCTUnwrap(owed.first)
        XCTAssertEqual(removed.id, 1)
        XCTAssertEqual(removed.jobId, 1)
        XCTAssertEqual(removed.stage, .job)
        XCTAssertEqual(removed.state, .failed)
        XCTAssertEqual(removed.onEnd, "sleep 30")
        XCTAssertEqual(removed.destination, "/tmp/s6/fx/out/a.bin")
        let object = try JSONSerialization.jsonObject(with: Data(removed.job.utf8)) as? [String: Any]
        XCTAssertEqual(object?["id"] as? Int, 1)
        XCTAssertEqual(object?["state"] as? String, "failed")
        // Job 2 leaves its failure (a retry) while its hook is owed, twice.
        var batch = WriteBatch()
        let first = OwedHook(
            id: 2, jobId: 2, stage: .job, state: .failed, destination: nil, onEnd: "sleep 30", job: "{}")
        var second = first
        second.id = 3
        second.stage = .daemon
        batch.putOwedHook(first)
        batch.putOwedHook(second)
        try store.commit(batch, now: 2)
        XCTAssertEqual(try store.owedHooks(), [removed, first, second])
        var done = WriteBatch()
        done.finishOwedHook(1)
        done.finishOwedHook(3)
        try store.commit(done, now: 3)
        XCTAssertEqual(try store.owedHooks(), [first])
        let tables = try DatabaseQueue(path: copy.path).read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        }
        XCTAssertTrue(tables.contains("owed_hook"))
        XCTAssertFalse(tables.contains("removed_hook"))
    }

    /// Migration "v9-one-state-index" drops `job_unfinished`, which no query used: the start's
    /// unfinished jobs, `list --state` pages and the counts search `job_on_state` (a state, then
    /// ids in order) before and after, in a v7 database the daemon wrote.
    func testThatAV7DatabaseLosesTheUnusedIndexAndItsQueriesStillSearchTheStateIndex() throws {
        let copy = try copyFixture("transfers-v7")
        defer { try? FileManager.default.removeItem(at: copy.deletingLastPathComponent()) }
        let queries = [
            "SELECT id FROM job WHERE state IN ('queued', 'running', 'waiting', 'paused', 'failed') AND id BETWEEN 1 AND 9",
            "SELECT id FROM job WHERE id > 0 AND state = 'failed' ORDER BY id LIMIT 5",
            "SELECT state, COUNT(*) FROM job GROUP BY state",
        ]
        func plans(_ path: String) throws -> [String] {
            try DatabaseQueue(path: path).read { db in
                try queries.map { q in
                    try Row.fetchAll(db, sql: "EXPLAIN QUERY PLAN " + q).map { $0["detail"] as String }.joined(
                        separator: "; ")
                }
            }
        }
        let before = try plans(copy.path)
        let indexesBefore = try DatabaseQueue(path: copy.path).read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'job'")
        }
        XCTAssertTrue(indexesBefore.contains("job_unfinished"))
        _ = try JobStore(path: copy.path)
        let indexes = try DatabaseQueue(path: copy.path).read { db in
            try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'job'")
        }
        XCTAssertFalse(indexes.contains("job_unfinished"))
        XCTAssertTrue(indexes.contains("job_on_state"))
        let after = try plans(copy.path)
        XCTAssertEqual(after, before)
        for plan in after { XCTAssertTrue(plan.contains("job_on_state"), plan) }
    }

    /// Migration "v5-segments-limits" adds the `setting` table (bandwidth limits) and a job's
    /// `segments`: a v3 database keeps its jobs, has no limits and no segments, and takes both.
    func testThatASchemaV3DatabaseUpgradesThroughV5WithNoLimitsAndNoSegments() throws {
        let copy = try copyFixture("transfers-v3")
        defer { try? FileManager.default.removeItem(at: copy.deletingLastPathComponent()) }
        let store = try JobStore(path: copy.path)
        XCTAssertEqual(try store.limits(), BandwidthLimits())
        let jobs = try store.jobs()
        XCTAssertEqual(jobs.count, 4)
        XCTAssertTrue(jobs.allSatisfy { $0.segments == nil })
        let limits = try BandwidthLimits().changed(download: nil, upload: "off", schedule: "08:00,1M 19:00,off")
        try store.saveLimits(limits)
        var batch = WriteBatch()
        var p = JobPatch()
        p.segments = .some("[[0,10,5],[10,20,10]]")
        batch.patch(jobs[3].id ?? 0, p)
        try store.commit(batch, now: 1)
        let reopened = try JobStore(path: copy.path)
        XCTAssertEqual(try reopened.limits(), limits)
        XCTAssertEqual(try reopened.job(jobs[3].id ?? 0)?.segments, "[[0,10,5],[10,20,10]]")
        XCTAssertEqual(try reopened.schedulingFacts().first { $0.id == jobs[3].id }?.segmented, true)
    }

    private func copyFixture(_ name: String) throws -> URL {
        let fixture = try XCTUnwrap(
            Bundle.module.url(forResource: name, withExtension: "sqlite", subdirectory: "Fixtures"))
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("aft-upgrade-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        let copy = dir.appendingPathComponent("transfers.sqlite")
        try FileManager.default.copyItem(at: fixture, to: copy)
        return copy
    }

    /// The number of history entries of each job in the JSON column, read before migrating.
    private func rawHistories(_ path: String) throws -> [Int] {
        let q = try DatabaseQueue(path: path)
        return try q.read { db in
            try String.fetchAll(db, sql: "SELECT history FROM job ORDER BY id").map { text in
                (try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [Any])?.count ?? -1
            }
        }
    }
}
