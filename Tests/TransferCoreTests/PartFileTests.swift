import Foundation
import XCTest

@testable import TransferCore

final class PartFileTests: TemporaryDirectoryTestCase {
    func testThatAWholeSmallPartIsWrittenOverWhatWasThereWithTheGivenMode() throws {
        let path = dir + "/f.aftpart"
        // A stale, longer part of another download: cut away, never spliced.
        try Data(repeating: 0xEE, count: 100).write(to: URL(fileURLWithPath: path))
        let bytes = Array("small body".utf8)
        XCTAssertEqual(PartFile.writeWholeNow(path: path, bytes: bytes, mode: 0o640), 0)
        XCTAssertEqual(try Data(contentsOf: URL(fileURLWithPath: path)), Data(bytes))
        let mode = try FileManager.default.attributesOfItem(atPath: path)[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o640)
    }

    func testThatAnEmptyBodyMakesAnEmptyPart() throws {
        let path = dir + "/empty.aftpart"
        XCTAssertEqual(PartFile.writeWholeNow(path: path, bytes: [], mode: 0o644), 0)
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int, 0)
    }

    func testThatAMissingDirectoryIsReportedAndNothingIsLeft() throws {
        let path = dir + "/missing/f.aftpart"
        let result = PartFile.writeWholeNow(path: path, bytes: [1, 2, 3], mode: 0o644)
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
