import Foundation
import XCTest

@testable import TransferCore

final class PartFileTests: TemporaryDirectoryTestCase {
    func testThatAWholeSmallPartIsWrittenOverWhatWasThereWithTheGivenMode() throws {
        let loop = try EventLoop()
        let path = dir + "/f.aftpart"
        // A stale, longer part of another download: cut away, never spliced.
        try Data(repeating: 0xEE, count: 100).write(to: URL(fileURLWithPath: path))
        let bytes = Array("small body".utf8)
        var result: Int32 = -1
        PartFile.writeWhole(loop: loop, path: path, bytes: bytes, mode: 0o640) { result = $0 }
        loop.run()
        XCTAssertEqual(result, 0)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), Data(bytes))
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o640)
    }

    func testThatAnEmptyBodyMakesAnEmptyPart() throws {
        let loop = try EventLoop()
        let path = dir + "/empty.aftpart"
        var result: Int32 = -1
        PartFile.writeWhole(loop: loop, path: path, bytes: [], mode: 0o644) { result = $0 }
        loop.run()
        XCTAssertEqual(result, 0)
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int, 0)
    }

    func testThatAMissingDirectoryIsReportedAndNothingIsLeft() throws {
        let loop = try EventLoop()
        let path = dir + "/missing/f.aftpart"
        var result: Int32 = -1
        PartFile.writeWhole(loop: loop, path: path, bytes: [1, 2, 3], mode: 0o644) { result = $0 }
        loop.run()
        XCTAssertEqual(result, ENOENT)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
        XCTAssertEqual(FileErrors.error(result, "cannot write \(path)").code, .destinationMissingDir)
    }

    func testThatAPartOpenedWithTruncateStartsEmptyAndOneWithoutKeepsItsBytes() throws {
        let loop = try EventLoop()
        let path = dir + "/keep.aftpart"
        try Data(repeating: 7, count: 10).write(to: URL(fileURLWithPath: path))
        let kept = try PartFile(loop: loop, path: path, mode: 0o644)
        XCTAssertEqual(kept.size(), 10)
        kept.close()
        let fresh = try PartFile(loop: loop, path: path, mode: 0o644, truncate: true)
        XCTAssertEqual(fresh.size(), 0)
        fresh.close()
    }
}
