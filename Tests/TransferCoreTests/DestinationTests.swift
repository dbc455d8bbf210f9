import Foundation
import XCTest

@testable import TransferCore

final class DestinationTests: XCTestCase {
    private var dir: String!

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "aft-dest-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }

    func testThatThePartSitsBesideTheFileAndLongNamesAreShortenedStably() {
        XCTAssertEqual(Destination(path: "/a/b.iso").partPath, "/a/b.iso.aftpart")
        let long = "/a/" + String(repeating: "é", count: 126)  // 252 bytes
        let part = Destination(path: long).partPath
        XCTAssertTrue(part.hasPrefix("/a/") && part.hasSuffix(".aftpart"))
        XCTAssertLessThanOrEqual((part as NSString).lastPathComponent.utf8.count, 255)
        XCTAssertEqual(part, Destination.partPath(long))
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
        XCTAssertLessThanOrEqual(syncer.syncCount, 2, "renames into one directory share their fsync")
        XCTAssertEqual(try String(contentsOfFile: dir + "/f7", encoding: .utf8), "7")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/f7.aftpart"))
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
