import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

final class DestinationTests: TemporaryDirectoryTestCase {
    func testThatThePartSitsBesideTheFileAndLongNamesAreShortenedStably() {
        XCTAssertEqual(Destination(path: "/a/b.iso").partPath, "/a/b.iso.aftpart")
        let long = "/a/" + String(repeating: "é", count: 126)  // 252 bytes
        let part = Destination(path: long).partPath
        XCTAssertTrue(part.hasPrefix("/a/") && part.hasSuffix(".aftpart"))
        XCTAssertLessThanOrEqual((part as NSString).lastPathComponent.utf8.count, 255)
        XCTAssertEqual(part, Destination.partPath(long))
    }

    func testThatDirectoryAndJoinedPathsAreThoseOfNSString() {
        for path in ["/a/b.iso", "/a", "/", "/a/b/", "/a//b", "//a", "/a/./b", "/a/b//", "/é/ü.bin"] {
            XCTAssertEqual(Destination.directory(of: path), (path as NSString).deletingLastPathComponent, path)
        }
        for dir in ["/a", "/", "/a/", "/a//b", "/é"] {
            XCTAssertEqual(
                Destination.path(of: "x.bin", in: dir), (dir as NSString).appendingPathComponent("x.bin"), dir)
        }
        XCTAssertEqual(Destination(path: "/srv/in/f.bin").directory, "/srv/in")
    }

    func testThatAMissingDirectoryIsRefusedUnlessCreatedWithTheGivenMode() throws {
        let nested = dir + "/x/y"
        XCTAssertThrowsError(try Destination.ensureDirectory(nested, create: false, mode: 0o755)) { e in
            XCTAssertEqual((e as? TransferError)?.code, .destinationMissingDir)
        }
        try Destination.ensureDirectory(nested, create: true, mode: 0o750)
        var st = stat()
        XCTAssertEqual(stat(nested, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o750)
        _ = FileManager.default.createFile(atPath: dir + "/file", contents: Data())
        XCTAssertThrowsError(try Destination.ensureDirectory(dir + "/file", create: true, mode: 0o755))
    }

    func testThatAClashIsAnotherJobOrAnExistingFileWithoutReplace() {
        let d = Destination(path: dir + "/f")
        XCTAssertNil(d.clash(replace: false, heldBy: nil))
        XCTAssertEqual(d.clash(replace: true, heldBy: 4)?.code, .destinationExists)
        _ = FileManager.default.createFile(atPath: d.path, contents: Data("x".utf8))
        XCTAssertEqual(d.clash(replace: false, heldBy: nil)?.code, .destinationExists)
        XCTAssertNil(d.clash(replace: true, heldBy: nil))
    }

    func testThatMovingIntoPlaceRenamesThenSyncsTheDirectoryOncePerBatch() throws {
        let loop = try EventLoop()
        let syncer = DirectorySyncer(loop: loop)
        var results: [TransferError?] = []
        for i in 0..<20 {
            let d = Destination(path: dir + "/f\(i)")
            _ = FileManager.default.createFile(atPath: d.partPath, contents: Data("\(i)".utf8))
            d.moveIntoPlace(from: d.partPath, replace: false, syncer: syncer) { results.append($0) }
        }
        loop.run()
        XCTAssertEqual(results.count, 20)
        XCTAssertTrue(results.allSatisfy { $0 == nil })
        XCTAssertGreaterThan(syncer.syncCount, 0)
        XCTAssertLessThanOrEqual(syncer.syncCount, 20, "never more than one fsync a rename")
        XCTAssertEqual(try String(contentsOfFile: dir + "/f7", encoding: .utf8), "7")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/f7.aftpart"))
    }

    func testThatRenamesMadeWhileAnFsyncRunsShareTheNextOne() throws {
        let loop = try EventLoop()
        let calls = Counter()
        // A slow fsync (50 ms): the threads that rename meanwhile wait for it, then share one.
        let syncer = DirectorySyncer(loop: loop) { _ in
            calls.increment()
            usleep(50_000)
            return 0
        }
        let threads = 8
        let done = DispatchGroup()
        let results = Results()
        for _ in 0..<threads {
            done.enter()
            Thread {
                results.append(syncer.syncAfterRename("/dir"))
                done.leave()
            }.start()
        }
        XCTAssertEqual(done.wait(timeout: .now() + 10), .success)
        XCTAssertEqual(results.values, Array(repeating: 0, count: threads))
        XCTAssertLessThanOrEqual(calls.value, 2, "one fsync running, one for the renames made meanwhile")
        XCTAssertEqual(syncer.syncCount, calls.value)
    }

    func testThatAFailedDirectoryFsyncIsReportedToEveryRenameItCovered() throws {
        let loop = try EventLoop()
        let syncer = DirectorySyncer(loop: loop) { _ in EIO }
        XCTAssertEqual(syncer.syncAfterRename("/dir"), EIO)
        XCTAssertEqual(syncer.syncAfterRename("/dir"), EIO, "a later rename gets its own fsync")
        XCTAssertEqual(syncer.syncCount, 2)
    }

    func testThatAnExistingFileIsNotReplacedWithoutReplace() throws {
        let loop = try EventLoop()
        let d = Destination(path: dir + "/keep")
        _ = FileManager.default.createFile(atPath: d.path, contents: Data("old".utf8))
        _ = FileManager.default.createFile(atPath: d.partPath, contents: Data("new".utf8))
        var result: TransferError??
        d.moveIntoPlace(from: d.partPath, replace: false, syncer: DirectorySyncer(loop: loop)) { result = .some($0) }
        loop.run()
        XCTAssertEqual(result??.code, .destinationExists)
        XCTAssertEqual(try String(contentsOfFile: d.path, encoding: .utf8), "old")
    }
}

/// A count shared by threads.
private final class Counter: @unchecked Sendable {
    private let lock = NSLock()
    private var n = 0
    var value: Int { lock.withLock { n } }
    func increment() { lock.withLock { n += 1 } }
}

/// Results gathered from threads.
private final class Results: @unchecked Sendable {
    private let lock = NSLock()
    private var list: [Int32] = []
    var values: [Int32] { lock.withLock { list } }
    func append(_ v: Int32) { lock.withLock { list.append(v) } }
}
