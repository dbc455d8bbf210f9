import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

final class JobStoreTests: XCTestCase {
    private var dir: URL!

    override func setUpWithError() throws {
        dir = FileManager.default.temporaryDirectory.appendingPathComponent("aft-store-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(at: dir)
    }

    private func record(priority: Int = 0, destination: String = "/tmp/f") -> JobRecord {
        var req = TransferRequest(url: "http://u:secret@example.com/f")
        req.headers = ["Authorization: Bearer x"]
        req.retries = 3
        return JobRecord(
            id: nil, kind: .download, url: req.url, method: "GET", state: .queued, request: req,
            destination: destination, durableBytes: 0, total: nil, etag: nil, lastModified: nil, attempts: 0,
            retriesUsed: 0, httpStatus: nil, error: nil, waitReason: nil, nextRetryAt: nil, priority: priority,
            finalizing: false, sha256: nil, sourceSize: nil, sourceMtime: nil, response: nil, history: [],
            createdAt: 1, updatedAt: 1, completedAt: nil)
    }

    private func open() throws -> JobStore { try JobStore(path: dir.appendingPathComponent("t.sqlite").path) }

    func testThatAJobRoundTripsWithItsOptionsAndHistory() throws {
        let store = try open()
        let id = try XCTUnwrap(try store.insert(record()).id)
        var batch = WriteBatch()
        var p = JobPatch()
        p.error = .some(TransferError(.timeout, "stalled"))
        batch.patch(id, p)
        batch.putAttempt(id, seq: 0, AttemptRecord(attempt: 1, startedAt: "s", httpStatus: 206, bytes: 10))
        try store.commit(batch, now: 5)
        let back = try XCTUnwrap(try store.job(id))
        XCTAssertEqual(back.request.headers, ["Authorization: Bearer x"])
        XCTAssertEqual(back.history.first?.httpStatus, 206)
        XCTAssertEqual(back.error?.code, .timeout)
        XCTAssertEqual(back.updatedAt, 5)
    }

    func testThatAPatchWritesOnlyTheColumnsItSetsAndNullsDoubleOptionals() throws {
        let store = try open()
        var r = record()
        r.etag = "\"e\""
        r.total = 100
        let id = try XCTUnwrap(try store.insert(r).id)
        var batch = WriteBatch()
        var first = JobPatch()
        first.durableBytes = 40
        batch.patch(id, first)
        var second = JobPatch()
        second.etag = .some(nil)
        second.state = .paused
        batch.patch(id, second)
        try store.commit(batch, now: 2)
        let back = try XCTUnwrap(try store.job(id))
        XCTAssertEqual(back.durableBytes, 40)
        XCTAssertNil(back.etag)
        XCTAssertEqual(back.total, 100)
        XCTAssertEqual(back.state, .paused)
    }

    func testThatEachSetOfColumnsGetsItsOwnUpdateAndARepeatedSetReusesIt() throws {
        let store = try open()
        let a = try XCTUnwrap(try store.insert(record()).id)
        let b = try XCTUnwrap(try store.insert(record()).id)
        func patch(_ set: (inout JobPatch) -> Void) -> JobPatch {
            var p = JobPatch()
            set(&p)
            return p
        }
        var batch = WriteBatch()
        batch.patch(
            a,
            patch {
                $0.state = .running
                $0.durableBytes = 7
            })
        batch.patch(
            b,
            patch {
                $0.total = 99
                $0.etag = .some("\"b\"")
            })
        try store.commit(batch, now: 1)
        // The next pass: a's set of columns for b (the cached statement), a new one for a.
        batch = WriteBatch()
        batch.patch(
            b,
            patch {
                $0.state = .paused
                $0.durableBytes = 11
            })
        batch.patch(a, patch { $0.total = 5 })
        try store.commit(batch, now: 2)
        let backA = try XCTUnwrap(try store.job(a))
        let backB = try XCTUnwrap(try store.job(b))
        XCTAssertEqual([backA.state, backB.state], [.running, .paused])
        XCTAssertEqual([backA.durableBytes, backB.durableBytes], [7, 11])
        XCTAssertEqual([backA.total, backB.total], [5, 99])
        XCTAssertEqual([backA.etag, backB.etag], [nil, "\"b\""])
        XCTAssertEqual([backA.updatedAt, backB.updatedAt], [2, 2])
    }

    func testThatLaterAttemptWritesReplaceEarlierOnesOfTheSameEntry() throws {
        let store = try open()
        let id = try XCTUnwrap(try store.insert(record()).id)
        var batch = WriteBatch()
        batch.putAttempt(id, seq: 0, AttemptRecord(attempt: 1, startedAt: "a"))
        try store.commit(batch, now: 2)
        var next = WriteBatch()
        next.putAttempt(id, seq: 0, AttemptRecord(attempt: 1, startedAt: "a", endedAt: "b", bytes: 9))
        next.putAttempt(id, seq: 1, AttemptRecord(attempt: 2, startedAt: "c"))
        var checkpoint = JobPatch()
        checkpoint.durableBytes = 5
        next.patch(id, checkpoint)
        try store.commit(next, now: 3)
        let history = try XCTUnwrap(try store.job(id)).history
        XCTAssertEqual(history.map(\.attempt), [1, 2])
        XCTAssertEqual(history[0].bytes, 9)
        XCTAssertEqual(history[0].endedAt, "b")
        // A crash's open entry ends at its job's last change (here the commit at 3).
        try store.closeOpenAttempts(fallback: 99)
        XCTAssertEqual(try XCTUnwrap(try store.job(id)).history.map(\.endedAt), ["b", Timestamp.rfc3339(3)])
    }

    func testThatManyJobsAreInsertedInOneTransactionOrNone() throws {
        let store = try open()
        let jobs = try store.insert((0..<500).map { record(destination: "/tmp/f\($0)") })
        XCTAssertEqual(jobs.compactMap(\.id).count, 500)
        XCTAssertEqual(Set(jobs.compactMap(\.id)).count, 500)
        XCTAssertEqual(try store.counts()[.queued], 500)
    }

    func testThatDeletingAJobDeletesItsHistory() throws {
        let store = try open()
        let id = try XCTUnwrap(try store.insert(record()).id)
        var batch = WriteBatch()
        batch.putAttempt(id, seq: 0, AttemptRecord(attempt: 1, startedAt: "a"))
        try store.commit(batch, now: 2)
        var del = WriteBatch()
        del.patch(id, JobPatch.partDiscarded)
        del.delete(id)
        try store.commit(del, now: 3)
        XCTAssertNil(try store.job(id))
        let again = try store.insert(record())
        XCTAssertEqual(try XCTUnwrap(try store.job(XCTUnwrap(again.id))).history, [])
    }

    func testThatSchedulingFactsCoverUnfinishedAndFailedJobsOnly() throws {
        let store = try open()
        let ids = try store.insert((0..<4).map { record(priority: $0, destination: "/d/\($0)") }).compactMap(\.id)
        var batch = WriteBatch()
        var done = JobPatch()
        done.state = .completed
        batch.patch(ids[0], done)
        var failed = JobPatch()
        failed.state = .failed
        failed.hookPending = .some(.daemon)
        batch.patch(ids[1], failed)
        try store.commit(batch, now: 2)
        let facts = try store.schedulingFacts()
        XCTAssertEqual(facts.map(\.id).sorted(), Array(ids[1...]))
        XCTAssertEqual(facts.first { $0.id == ids[3] }?.priority, 3)
        XCTAssertEqual(facts.first { $0.id == ids[3] }?.retryLimit, 3)
        XCTAssertEqual(facts.first { $0.id == ids[1] }?.state, .failed)
        // A failed job's hook still owed: what its retry or removal must keep (read at start).
        XCTAssertEqual(facts.first { $0.id == ids[1] }?.hookPending, .daemon)
        XCTAssertNil(facts.first { $0.id == ids[2] }?.hookPending)
    }

    func testThatListingsComePageByPageInIdOrderWithTheirHistories() throws {
        let store = try open()
        let ids = try store.insert((0..<10).map { record(destination: "/d/\($0)") }).compactMap(\.id)
        var batch = WriteBatch()
        batch.putAttempt(ids[4], seq: 0, AttemptRecord(attempt: 1, startedAt: "x", httpStatus: 404))
        var paused = JobPatch()
        paused.state = .paused
        batch.patch(ids[7], paused)
        try store.commit(batch, now: 2)
        let first = try store.listings(state: nil, after: nil, limit: 4)
        XCTAssertEqual(first.map(\.id), Array(ids[0..<4]))
        let second = try store.listings(state: nil, after: first.last?.id, limit: 4)
        XCTAssertEqual(second.map(\.id), Array(ids[4..<8]))
        XCTAssertEqual(second[0].history.first?.httpStatus, 404)
        XCTAssertEqual(second[1].history, [])
        XCTAssertEqual(try store.listings(state: .paused, after: nil, limit: 100).map(\.id), [ids[7]])
        XCTAssertEqual(first[0].url, "http://u:secret@example.com/f")
    }

    func testThatAStagedBatchBecomesJobsWithConsecutiveIdsInItsOrder() throws {
        let store = try open()
        _ = try store.insert(record(destination: "/tmp/before"))
        try store.stage((0..<3).map { record(priority: $0, destination: "/tmp/a\($0)") }, batch: "1:a")
        try store.stage([record(destination: "/tmp/other")], batch: "2:a")
        try store.stage((3..<5).map { record(priority: $0, destination: "/tmp/a\($0)") }, batch: "1:a")
        XCTAssertEqual(try store.jobs().count, 1, "held rows are not jobs")
        let ids = try XCTUnwrap(try store.insertStaged(batch: "1:a", now: 5_000))
        XCTAssertEqual(ids, 2...6)
        let jobs = try store.jobs()
        XCTAssertEqual(jobs.map(\.destination), ["/tmp/before", "/tmp/a0", "/tmp/a1", "/tmp/a2", "/tmp/a3", "/tmp/a4"])
        XCTAssertEqual(jobs.dropFirst().map(\.priority), [0, 1, 2, 3, 4])
        // Created when the batch is queued, not when each part came (an outside audit: a job
        // queued between two parts looked younger than the batch's first jobs).
        XCTAssertEqual(jobs.dropFirst().map(\.createdAt), Array(repeating: 5_000, count: 5))
        XCTAssertEqual(jobs.dropFirst().map(\.updatedAt), Array(repeating: 5_000, count: 5))
        XCTAssertEqual(jobs[1].request.headers, ["Authorization: Bearer x"])
        XCTAssertEqual(try store.schedulingFacts(ids: ids).map(\.id), Array(2...6))
        XCTAssertNil(try store.insertStaged(batch: "1:a", now: 5_000), "the batch's rows are gone once queued")
        try store.discardStaged(batch: "2:a")
        XCTAssertNil(try store.insertStaged(batch: "2:a", now: 5_000))
    }

    func testThatHeldRowsDoNotOutliveTheDaemon() throws {
        try open().stage([record()], batch: "1:a")
        let reopened = try open()
        XCTAssertNil(try reopened.insertStaged(batch: "1:a", now: 5_000))
        XCTAssertEqual(try reopened.jobs().count, 0)
    }

    func testThatReopeningAMigratedDatabaseKeepsItsJobs() throws {
        do {
            let store = try open()
            _ = try store.insert(record())
        }
        let again = try open()
        XCTAssertEqual(try again.jobs().count, 1)
        XCTAssertEqual(try again.counts()[.queued], 1)
    }
}
