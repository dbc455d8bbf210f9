import XCTest

@testable import aftransfer

/// A refusal names the option the person typed (``RefusalWording``), and one about an option or the
/// list's directory is not put on a list's line.
final class RefusalWordingTests: XCTestCase {
    func testThatAFieldSetByAnOptionIsNamedAsTheOption() {
        let wording = RefusalWording("limitRate: \"5Q\" is not a rate")
        XCTAssertEqual(wording.text, "--limit-rate: \"5Q\" is not a rate")
        XCTAssertTrue(wording.isAboutAnOption)
        XCTAssertEqual(RefusalWording.message("onEnd: is empty", origin: "urls.txt line 1"), "--on-end: is empty")
    }

    func testThatAHeaderRefusalIsAboutTheHeaderOptionNotALine() {
        // Every line of a `-i` list gets the command's `-H`s.
        XCTAssertEqual(
            RefusalWording.message("header Range: the daemon sets it itself", origin: "urls.txt line 1"),
            "header Range: the daemon sets it itself")
        XCTAssertEqual(
            RefusalWording.message("header: missing ':' between name and value", origin: "urls.txt line 1"),
            "header: missing ':' between name and value")
    }

    func testThatARequestsOwnFieldsKeepTheirLine() {
        XCTAssertEqual(
            RefusalWording.message("url: scheme \"ftp\" is not supported", origin: "urls.txt line 2"),
            "urls.txt line 2: url: scheme \"ftp\" is not supported")
        XCTAssertEqual(RefusalWording.message("destination: /x exists", origin: nil), "destination: /x exists")
        XCTAssertEqual(
            RefusalWording.message("directory: /etc/hostname is not a directory", origin: "urls.txt line 1"),
            "directory: /etc/hostname is not a directory")
        XCTAssertEqual(RefusalWording("the home's disk is full").text, "the home's disk is full")
    }
}
