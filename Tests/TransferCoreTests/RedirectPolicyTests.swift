import XCTest

@testable import TransferBase
@testable import TransferCore

final class RedirectPolicyTests: XCTestCase {
    private func next(_ from: String, _ to: String?, status: Int = 302, followed: Int = 0, upload: Bool = false)
        -> Result<String, TransferError>
    {
        RedirectPolicy.next(from: from, location: to, status: status, followed: followed, isUpload: upload)
    }

    func testThatAnHTTPSRedirectToHTTPIsRefused() {
        guard case .failure(let e) = next("https://a/x", "http://a/y") else { return XCTFail("followed") }
        XCTAssertEqual(e.code, .redirect)
        XCTAssertFalse(e.retryable)
    }

    func testThatARedirectToAnotherSchemeIsRefused() {
        guard case .failure(let e) = next("http://a/x", "ftp://a/y") else { return XCTFail("followed") }
        XCTAssertEqual(e.code, .redirect)
        // A file: URL has no host: named by its scheme too, not as "an invalid URL" (an audit).
        guard case .failure(let f) = next("http://a/x", "file:///etc/passwd") else { return XCTFail("followed") }
        XCTAssertEqual(f.message, "redirect to a file: URL refused")
        guard case .failure(let g) = next("http://a/x", "http:///nohost") else { return XCTFail("followed") }
        XCTAssertEqual(g.message, "redirect to an invalid URL")
    }

    func testThatTheEleventhRedirectIsRefused() {
        XCTAssertNoThrow(try next("http://a/x", "http://a/y", followed: 9).get())
        guard case .failure(let e) = next("http://a/x", "http://a/y", followed: 10) else { return XCTFail("followed") }
        XCTAssertEqual(e.code, .redirect)
    }

    func testThatUploadsFollowOnly307And308() {
        XCTAssertNoThrow(try next("http://a/x", "http://a/y", status: 307, upload: true).get())
        XCTAssertNoThrow(try next("http://a/x", "http://a/y", status: 308, upload: true).get())
        guard case .failure(let e) = next("http://a/x", "http://a/y", status: 302, upload: true) else {
            return XCTFail("followed")
        }
        XCTAssertEqual(e.code, .redirect)
    }

    func testThatAnotherHostNameIsAnotherOriginEvenOnTheSameAddress() {
        XCTAssertFalse(RedirectPolicy.sameOrigin("http://127.0.0.1:80/a", "http://localhost:80/b"))
        XCTAssertTrue(RedirectPolicy.sameOrigin("http://Example.com/a", "http://example.com:80/b"))
        XCTAssertFalse(RedirectPolicy.sameOrigin("http://a:8080/", "http://a:8081/"))
    }

    func testThatOnlyHTTPSToHTTPIsADowngrade() {
        XCTAssertTrue(RedirectPolicy.downgrades(from: "https://a/x", to: "http://a/y"))
        XCTAssertTrue(RedirectPolicy.downgrades(from: "HTTPS://a/x", to: "HTTP://b/y"))
        XCTAssertFalse(RedirectPolicy.downgrades(from: "http://a/x", to: "https://a/y"))
        XCTAssertFalse(RedirectPolicy.downgrades(from: "https://a/x", to: "https://b/y"))
        XCTAssertFalse(RedirectPolicy.downgrades(from: "http://a/x", to: "http://b/y"))
    }
}
