import Foundation
import XCTest

@testable import TransferCore

/// `Fixtures/transfers-v1.sqlite` was written by the first released daemon (schema "v1": one
/// completed download, one failed on a 404, one paused with a part and an Authorization header).
/// Every later migration must open it and keep its jobs as they were.
final class StoreUpgradeTests: XCTestCase {
    func testThatADatabaseWrittenByTheFirstDaemonOpensWithItsJobsIntact() throws {
        let fixture = try XCTUnwrap(Bundle.module.url(forResource: "transfers-v1", withExtension: "sqlite", subdirectory: "Fixtures"))
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
}
