import XCTest

@testable import TransferCore

final class CurlCommandRendererTests: XCTestCase {
    func testThatTheCurlCommandRedactsPasswordsAndSecretHeaders() {
        var req = TransferRequest(url: "https://bob:hunter2@example.com/f.iso")
        req.user = "alice:s3cret"
        req.headers = ["Authorization: Bearer tok", "Cookie: a=b", "X-Plain: ok"]
        let r = JobRecord(
            id: 1, kind: .download, url: req.url, method: "GET", state: .queued, request: req,
            destination: "/tmp/f.iso", durableBytes: 0, total: nil, etag: nil, lastModified: nil, attempts: 0,
            retriesUsed: 0, httpStatus: nil, error: nil, waitReason: nil, nextRetryAt: nil, priority: 0,
            finalizing: false, sha256: nil, sourceSize: nil, sourceMtime: nil, response: nil, history: [],
            createdAt: 0, updatedAt: 0, completedAt: nil)
        let cmd = CurlCommandRenderer.render(r)
        for secret in ["hunter2", "s3cret", "Bearer tok", "a=b"] { XCTAssertFalse(cmd.contains(secret), secret) }
        XCTAssertTrue(cmd.contains("alice:***"))
        XCTAssertTrue(cmd.contains("X-Plain: ok"))
        XCTAssertTrue(cmd.contains("-o /tmp/f.iso"))
        XCTAssertTrue(cmd.hasPrefix("curl "))
    }

    func testThatShellWordsWithSpacesAndQuotesAreQuoted() {
        XCTAssertEqual(CurlCommandRenderer.quote("a b"), "'a b'")
        XCTAssertEqual(CurlCommandRenderer.quote("it's"), "'it'\\''s'")
        XCTAssertEqual(CurlCommandRenderer.quote("/tmp/x"), "/tmp/x")
    }
}
