import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

/// Control commands through the engine in-process: their rows are written once, in the command's
/// own transaction, and the copies in memory (what `status` and events show) match those rows.
final class EngineControlTests: TemporaryDirectoryTestCase {
    private func queuedJobs(_ n: Int, in store: JobStore) throws -> [Int64] {
        try (0..<n).map { i in
            var request = TransferRequest(url: "http://127.0.0.1:1/f\(i)")
            request.destination = dir + "/f\(i)"
            let record = JobRecord(
                id: nil, kind: .download, url: request.url, method: "GET", state: .queued, request: request,
                destination: request.destination, durableBytes: 0, total: nil, etag: nil, lastModified: nil,
                attempts: 0, retriesUsed: 0, httpStatus: nil, error: nil, waitReason: nil, nextRetryAt: nil,
                priority: 0, finalizing: false, sha256: nil, sourceSize: nil, sourceMtime: nil, response: nil,
                history: [], createdAt: 1, updatedAt: 1, completedAt: nil)
            return try XCTUnwrap(try store.insert(record).id)
        }
    }

    /// `pause` of queued jobs, then `cancel` of one: each answer's job objects are the rows as
    /// committed, `updatedAt` included, and the end of the pass writes nothing older over them.
    func testThatACommandsRowsAndItsAnswerAgree() throws {
        let store = try JobStore(path: dir + "/t.sqlite")
        let ids = try queuedJobs(3, in: store)
        let engine = try Engine(loop: try EventLoop(), store: store, config: EngineConfig())
        try engine.recover()

        let paused = try engine.control(.pause, ids: ids + [ids[0], 999], deleteFiles: false)
        XCTAssertEqual(paused.jobs.map(\.id), ids, "an id given twice counts once")
        XCTAssertEqual(paused.refused.map(\.id), [999])
        for job in paused.jobs {
            let row = try XCTUnwrap(try store.job(job.id))
            XCTAssertEqual(row.state, .paused, "written by the command, before the pass's commit")
            XCTAssertEqual(Timestamp.rfc3339(row.updatedAt), job.updatedAt)
            XCTAssertEqual(engine.job(job.id)?.updatedAt, job.updatedAt, "the copy in memory")
        }
        try engine.commit()
        for job in paused.jobs {
            let row = try XCTUnwrap(try store.job(job.id))
            XCTAssertEqual(row.state, .paused)
            XCTAssertEqual(Timestamp.rfc3339(row.updatedAt), job.updatedAt, "the pass's commit kept the row")
        }

        let cancelled = try engine.control(.cancel, ids: [ids[1]], deleteFiles: false)
        try engine.commit()
        let row = try XCTUnwrap(try store.job(ids[1]))
        XCTAssertEqual(row.state, .cancelled)
        XCTAssertEqual(cancelled.jobs.first?.state, .cancelled)
        XCTAssertEqual(Timestamp.rfc3339(row.updatedAt), cancelled.jobs.first?.updatedAt)
        XCTAssertEqual(try store.job(ids[0])?.state, .paused)
    }
}
