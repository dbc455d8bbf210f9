import Foundation
import XCTest

/// A test case with a fresh directory of its own (`dir`), removed after each test.
class TemporaryDirectoryTestCase: XCTestCase {
    /// The test's directory.
    var dir: String!

    override func setUpWithError() throws {
        dir = NSTemporaryDirectory() + "aft-test-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: dir) }
}
