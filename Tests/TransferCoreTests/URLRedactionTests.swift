import XCTest

@testable import TransferBase
@testable import TransferCore

final class URLRedactionTests: XCTestCase {
    func testThatUserAndPasswordAreRemoved() {
        XCTAssertEqual(URLRedaction.redact("https://me:secret@example.com/x"), "https://example.com/x")
        XCTAssertEqual(URLRedaction.redact("http://me@example.com:8080/x?q=1"), "http://example.com:8080/x?q=1")
        XCTAssertEqual(URLRedaction.redact("http://me:secret@example.com"), "http://example.com")
    }

    func testThatAPasswordWithAnUnencodedAtSignIsRemovedWhole() {
        XCTAssertEqual(URLRedaction.redact("http://me:p@ss@host/x"), "http://host/x")
    }

    func testThatAnAtSignAfterTheAuthorityIsKept() {
        XCTAssertEqual(URLRedaction.redact("http://host/a@b"), "http://host/a@b")
        XCTAssertEqual(URLRedaction.redact("http://host?mail=a@b"), "http://host?mail=a@b")
        XCTAssertEqual(URLRedaction.redact("http://host#a@b"), "http://host#a@b")
    }

    func testThatURLsWithoutCredentialsOrSchemeAreUnchanged() {
        XCTAssertEqual(URLRedaction.redact("https://example.com/x"), "https://example.com/x")
        XCTAssertEqual(URLRedaction.redact("not a url"), "not a url")
        XCTAssertEqual(URLRedaction.redact(""), "")
    }

    func testThatIPv6HostsSurvive() {
        XCTAssertEqual(URLRedaction.redact("http://u:p@[::1]:8080/x"), "http://[::1]:8080/x")
    }
}
