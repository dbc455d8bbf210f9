import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

/// One spelling a file (``CanonicalPath``): what lets the daemon see that two jobs name one file.
final class CanonicalPathTests: XCTestCase {
    private var root = ""

    override func setUpWithError() throws {
        let base = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("aft-canon-\(getpid())")
        try? FileManager.default.removeItem(at: base)
        try FileManager.default.createDirectory(at: base.appendingPathComponent("d"), withIntermediateDirectories: true)
        try FileManager.default.createSymbolicLink(
            atPath: base.appendingPathComponent("link").path, withDestinationPath: base.appendingPathComponent("d").path
        )
        let real = try XCTUnwrap(realpath(base.path, nil))
        defer { free(real) }
        root = String(cString: real)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: root)
    }

    func testThatSpellingsOfOneFileBecomeOne() {
        var cache: [String: String] = [:]
        let plain = "\(root)/d/x"
        for spelling in ["\(root)/link/x", "\(root)/d/../d/x", "\(root)//d/x", "\(root)/./d/x", "\(root)/link/../d/x"] {
            XCTAssertEqual(CanonicalPath.file(spelling, cache: &cache), plain, spelling)
        }
        XCTAssertEqual(CanonicalPath.directory("\(root)/link/", cache: &cache), "\(root)/d")
    }

    func testThatDirectoriesStillToBeCreatedKeepTheirNamesUnderTheResolvedParent() {
        var cache: [String: String] = [:]
        XCTAssertEqual(CanonicalPath.file("\(root)/link/new/sub/x", cache: &cache), "\(root)/d/new/sub/x")
        XCTAssertEqual(CanonicalPath.file("\(root)/link/new/../other/./x", cache: &cache), "\(root)/d/other/x")
    }

    /// A link to a directory not made yet: `--create-dirs` makes the directory through the link,
    /// so the file is the target's (two jobs wrote one part through such a link).
    func testThatADanglingLinkToADirectoryToBeMadeResolvesToItsTarget() throws {
        try FileManager.default.createSymbolicLink(atPath: "\(root)/dang", withDestinationPath: "nd")
        try FileManager.default.createSymbolicLink(atPath: "\(root)/far", withDestinationPath: "\(root)/d/../x/y")
        var cache: [String: String] = [:]
        XCTAssertEqual(CanonicalPath.file("\(root)/dang/f", cache: &cache), "\(root)/nd/f")
        XCTAssertEqual(CanonicalPath.file("\(root)/dang/sub/f", cache: &cache), "\(root)/nd/sub/f")
        XCTAssertEqual(CanonicalPath.file("\(root)/far/f", cache: &cache), "\(root)/x/y/f")
        try FileManager.default.createSymbolicLink(atPath: "\(root)/loop", withDestinationPath: "loop2/a")
        try FileManager.default.createSymbolicLink(atPath: "\(root)/loop2", withDestinationPath: "loop/b")
        XCTAssertFalse(CanonicalPath.file("\(root)/loop/f", cache: &cache).isEmpty, "a loop ends")
    }

    func testThatTheLastComponentIsKeptAndNonNamesAreLeftForTheValidator() {
        var cache: [String: String] = [:]
        // A link as the file itself is what --replace replaces: not followed.
        XCTAssertEqual(CanonicalPath.file("\(root)/link", cache: &cache), "\(root)/link")
        for odd in ["\(root)/d/", "\(root)/d/.", "\(root)/d/..", "relative/x", "/"] {
            XCTAssertEqual(CanonicalPath.file(odd, cache: &cache), odd, odd)
        }
        XCTAssertEqual(CanonicalPath.file("/x", cache: &cache), "/x")
    }
}
