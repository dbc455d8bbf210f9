import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

final class PartFileTests: TemporaryDirectoryTestCase {
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
