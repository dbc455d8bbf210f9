import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

/// Recovery of a download a crash interrupted while it was finalizing and whose part is gone:
/// the file at its destination is the finished download only when it has the recorded length
/// and, for a small one (written and moved in one work item), the recorded digest.
final class EngineRecoveryTests: TemporaryDirectoryTestCase {
    private let body = Array("the body that was downloaded".utf8)

    /// A store holding one running download to `dir/f`, recorded as finalizing with `body`'s
    /// digest and length, and no part; `existing`, when given, is what lies at the destination.
    private func recover(existing: [UInt8]?) throws -> JobRecord {
        let dest = dir + "/f"
        if let existing { XCTAssertTrue(FileManager.default.createFile(atPath: dest, contents: Data(existing))) }
        let store = try JobStore(path: dir + "/t.sqlite")
        var request = TransferRequest(url: "http://127.0.0.1:1/f")
        request.destination = dest
        request.replace = true
        var record = JobRecord(
            id: nil, kind: .download, url: request.url, method: "GET", state: .running, request: request,
            destination: dest, durableBytes: 0, total: Int64(body.count), etag: nil, lastModified: nil, attempts: 1,
            retriesUsed: 0, httpStatus: 200, error: nil, waitReason: nil, nextRetryAt: nil, priority: 0,
            finalizing: true, sha256: Sha256.hex(of: body), sourceSize: nil, sourceMtime: nil, response: nil,
            history: [], createdAt: 1, updatedAt: 1, completedAt: nil)
        let id = try XCTUnwrap(try store.insert(record).id)
        let engine = try Engine(loop: try EventLoop(), store: store, config: EngineConfig())
        try engine.recover()
        record = try XCTUnwrap(try store.job(id))
        return record
    }

    func testThatTheFileWithTheRecordedDigestIsTheFinishedDownload() throws {
        let job = try recover(existing: body)
        XCTAssertEqual(job.state, .completed)
        XCTAssertEqual(job.durableBytes, Int64(body.count))
        XCTAssertFalse(job.finalizing)
    }

    func testThatAnEarlierFileOfTheSameLengthIsNotTheDownload() throws {
        var other = body
        other[0] ^= 0xff
        let job = try recover(existing: other)
        XCTAssertEqual(job.state, .queued)
        XCTAssertEqual(job.durableBytes, 0)
    }

    func testThatAnEarlierFileOfAnotherLengthIsNotTheDownload() throws {
        let job = try recover(existing: Array(repeating: 7, count: 300 << 10))
        XCTAssertEqual(job.state, .queued)
    }

    func testThatNoFileMeansTheDownloadStartsAgain() throws {
        let job = try recover(existing: nil)
        XCTAssertEqual(job.state, .queued)
        XCTAssertEqual(job.durableBytes, 0)
    }

    func testThatABigFileOfTheRecordedLengthNeedsNoDigest() throws {
        let big = dir + "/big"
        let bytes = [UInt8](repeating: 1, count: DownloadTask.heldBodyLimit + 1)
        XCTAssertTrue(FileManager.default.createFile(atPath: big, contents: Data(bytes)))
        XCTAssertTrue(Destination.holdsFinishedDownload(big, size: Int64(bytes.count), sha256: "not checked"))
        XCTAssertFalse(Destination.holdsFinishedDownload(big, size: 5, sha256: nil))
        XCTAssertFalse(Destination.holdsFinishedDownload(dir, size: nil, sha256: nil), "a directory")
    }

    /// A cancel or a remove wrote its rows and the daemon stopped before the part was deleted:
    /// the next start deletes it, unless an unfinished job holds that destination again.
    func testThatAPartACrashLeftBehindACancelIsDeletedAtTheNextStart() throws {
        let store = try JobStore(path: dir + "/t.sqlite")
        func job(_ state: TransferState, _ dest: String) throws {
            var request = TransferRequest(url: "http://127.0.0.1:1/f")
            request.destination = dest
            _ = try store.insert(
                JobRecord(
                    id: nil, kind: .download, url: request.url, method: "GET", state: state, request: request,
                    destination: dest, durableBytes: 0, total: nil, etag: nil, lastModified: nil, attempts: 1,
                    retriesUsed: 0, httpStatus: nil, error: nil, waitReason: nil, nextRetryAt: nil, priority: 0,
                    finalizing: false, sha256: nil, sourceSize: nil, sourceMtime: nil, response: nil, history: [],
                    createdAt: 1, updatedAt: 1, completedAt: nil))
        }
        let cancelled = dir + "/cancelled.bin"
        let removed = dir + "/removed.bin"
        let heldAgain = dir + "/held.bin"
        try job(.cancelled, cancelled)
        try job(.paused, heldAgain)  // a newer job, to the path a cancelled one left
        var batch = WriteBatch()
        for dest in [cancelled, removed, heldAgain] {
            XCTAssertTrue(FileManager.default.createFile(atPath: Destination.partPath(dest), contents: Data(body)))
            batch.doom(DoomedPart(path: Destination.partPath(dest), destination: dest))
        }
        try store.commit(batch, now: 2)
        XCTAssertEqual(try store.doomedParts().count, 3)

        let engine = try Engine(loop: try EventLoop(), store: store, config: EngineConfig())
        try engine.recover()
        XCTAssertFalse(FileManager.default.fileExists(atPath: Destination.partPath(cancelled)))
        XCTAssertFalse(FileManager.default.fileExists(atPath: Destination.partPath(removed)))
        XCTAssertTrue(FileManager.default.fileExists(atPath: Destination.partPath(heldAgain)), "the paused job's")
        XCTAssertEqual(try store.doomedParts(), [], "each record goes once looked at")
    }
}
