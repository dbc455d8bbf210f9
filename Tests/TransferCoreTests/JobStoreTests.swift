import Foundation
import XCTest

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

    private func record(priority: Int = 0) -> JobRecord {
        var req = TransferRequest(url: "http://u:secret@example.com/f")
        req.headers = ["Authorization: Bearer x"]
        return JobRecord(
            id: nil, kind: "download", url: req.url, method: "GET", state: .queued, request: req,
            destination: "/tmp/f", durableBytes: 0, total: nil, etag: nil, lastModified: nil, attempts: 0,
            retriesUsed: 0, httpStatus: nil, error: nil, waitReason: nil, nextRetryAt: nil, priority: priority,
            finalizing: false, sha256: nil, sourceSize: nil, sourceMtime: nil, response: nil, history: [],
            createdAt: 1, updatedAt: 1, completedAt: nil)
    }

    func testThatAJobRoundTripsWithItsOptionsAndHistory() throws {
        let store = try JobStore(path: dir.appendingPathComponent("t.sqlite").path)
        let inserted = try store.insert(record())
        let id = try XCTUnwrap(inserted.id)
        try store.update(id) { r in
            r.history.append(AttemptRecord(attempt: 1, startedAt: "s", httpStatus: 206, bytes: 10))
            r.error = TransferError(.timeout, "stalled")
        }
        let back = try XCTUnwrap(try store.job(id))
        XCTAssertEqual(back.request.headers, ["Authorization: Bearer x"])
        XCTAssertEqual(back.history.first?.httpStatus, 206)
        XCTAssertEqual(back.error?.code, .timeout)
    }

    func testThatQueuedJobsComeOutByPriorityThenAge() throws {
        let store = try JobStore(path: dir.appendingPathComponent("t.sqlite").path)
        let a = try store.insert(record(priority: 0))
        let b = try store.insert(record(priority: 5))
        let c = try store.insert(record(priority: 0))
        let order = try store.jobs(inStates: [.queued]).compactMap(\.id)
        XCTAssertEqual(order, [b.id, a.id, c.id].compactMap { $0 })
    }

    func testThatReopeningAMigratedDatabaseKeepsItsJobs() throws {
        let path = dir.appendingPathComponent("t.sqlite").path
        do {
            let store = try JobStore(path: path)
            _ = try store.insert(record())
        }
        let again = try JobStore(path: path)
        XCTAssertEqual(try again.jobs().count, 1)
        XCTAssertEqual(try again.counts()["queued"], 1)
    }

    func testThatAnUpdateOfAMissingJobWritesNothing() throws {
        let store = try JobStore(path: dir.appendingPathComponent("t.sqlite").path)
        XCTAssertNil(try store.update(99) { $0.state = .running })
    }
}
