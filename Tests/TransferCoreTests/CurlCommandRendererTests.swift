import XCTest

@testable import TransferBase
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

    /// A URL's user alone is sent with an empty password; from https every hop stays https.
    func testThatAUserWithoutAPasswordAndAnHTTPSStartAreRenderedAsTheDaemonSends() {
        func render(_ url: String) -> String {
            let req = TransferRequest(url: url)
            return CurlCommandRenderer.render(
                JobRecord(
                    id: 1, kind: .download, url: url, method: "GET", state: .queued, request: req,
                    destination: "/tmp/f", durableBytes: 0, total: nil, etag: nil, lastModified: nil, attempts: 0,
                    retriesUsed: 0, httpStatus: nil, error: nil, waitReason: nil, nextRetryAt: nil, priority: 0,
                    finalizing: false, sha256: nil, sourceSize: nil, sourceMtime: nil, response: nil, history: [],
                    createdAt: 0, updatedAt: 0, completedAt: nil))
        }
        let token = render("https://tok3n@example.com/f")
        XCTAssertTrue(token.contains("--user tok3n:"), token)
        XCTAssertTrue(token.contains("--proto-redir =https"), token)
        XCTAssertFalse(render("http://example.com/f").contains("--proto-redir"))
        // `--user` ends a name at its first colon: a name holding one stays in the URL, encoded.
        let colon = render("http://u6%3Aa:pX6@127.0.0.1:8080/f")
        XCTAssertFalse(colon.contains("--user"), colon)
        XCTAssertFalse(colon.contains("pX6"), colon)
        XCTAssertTrue(
            colon.hasSuffix(" 'http://u6%3Aa:***@127.0.0.1:8080/f'")
                || colon.hasSuffix(" http://u6%3Aa:***@127.0.0.1:8080/f"), colon)
        XCTAssertTrue(render("http://u6%3Aa@h/f").hasSuffix("http://u6%3Aa@h/f"))
    }

    /// The job retries 8 times unless told otherwise; curl alone never would, so the default shows.
    func testThatTheRetriesShowWhenTheyAreTheDefault() {
        var req = TransferRequest(url: "http://example.com/f")
        func render() -> String {
            CurlCommandRenderer.render(
                JobRecord(
                    id: 1, kind: .download, url: req.url, method: "GET", state: .queued, request: req,
                    destination: "/tmp/f", durableBytes: 0, total: nil, etag: nil, lastModified: nil, attempts: 0,
                    retriesUsed: 0, httpStatus: nil, error: nil, waitReason: nil, nextRetryAt: nil, priority: 0,
                    finalizing: false, sha256: nil, sourceSize: nil, sourceMtime: nil, response: nil, history: [],
                    createdAt: 0, updatedAt: 0, completedAt: nil))
        }
        XCTAssertTrue(render().contains(" --retry 8 "), render())
        req.retries = 0
        XCTAssertTrue(render().contains(" --retry 0 "), render())
    }

    func testThatShellWordsWithSpacesAndQuotesAreQuoted() {
        XCTAssertEqual(CurlCommandRenderer.quote("a b"), "'a b'")
        XCTAssertEqual(CurlCommandRenderer.quote("it's"), "'it'\\''s'")
        XCTAssertEqual(CurlCommandRenderer.quote("/tmp/x"), "/tmp/x")
        // Control characters: ANSI-C quoting, each byte as \xHH, never the byte itself.
        XCTAssertEqual(
            CurlCommandRenderer.quote("/d/a\u{1B}[2J\u{07}'b\\c\u{9B}.bin"), #"$'/d/a\x1B[2J\x07\'b\\c\xC2\x9B.bin'"#)
    }

    private func upload(_ resumable: String?) -> JobRecord {
        var req = TransferRequest(url: "https://example.com/up")
        req.kind = "upload"
        req.source = "/tmp/disk.img"
        req.resumable = resumable
        return JobRecord(
            id: 1, kind: .upload, url: req.url, method: "PUT", state: .queued, request: req,
            destination: "/tmp/disk.img", durableBytes: 0, total: 4096, etag: nil, lastModified: nil, attempts: 0,
            retriesUsed: 0, httpStatus: nil, error: nil, waitReason: nil, nextRetryAt: nil, priority: 0,
            finalizing: false, sha256: nil, sourceSize: 4096, sourceMtime: 1, response: nil, history: [],
            createdAt: 0, updatedAt: 0, completedAt: nil)
    }

    func testThatAResumableUploadShowsItsFirstRequestsHeadersAndOffShowsNone() {
        let auto = CurlCommandRenderer.render(upload(nil))
        XCTAssertTrue(auto.contains("-T /tmp/disk.img"))
        for h in ["'Upload-Draft-Interop-Version: 8'", "'Upload-Complete: ?1'", "'Upload-Length: 4096'"] {
            XCTAssertTrue(auto.contains("-H " + h), auto)
        }
        let tus = CurlCommandRenderer.render(upload("tus"))
        XCTAssertFalse(tus.contains("-T "), tus)
        XCTAssertTrue(tus.contains("-X POST") && tus.contains("'Tus-Resumable: 1.0.0'"), tus)
        let off = CurlCommandRenderer.render(upload("off"))
        XCTAssertFalse(off.contains("Upload-"), off)
    }

    func testThatAnUploadCarriesTheDaemonsContentTypeUserAgentAndNoExpect() {
        let cmd = CurlCommandRenderer.render(upload("off"))
        XCTAssertTrue(cmd.contains("-H 'Content-Type: application/octet-stream'"), cmd)
        XCTAssertTrue(cmd.contains("-H Expect:"), cmd)
        XCTAssertTrue(cmd.contains("-A aftransfer/\(AFTransferVersion.string)"), cmd)
        // A user who asks for the 100-continue round trip gets it from the daemon, and here.
        var asking = upload("off")
        asking.request.headers = ["expect: 100-continue"]
        let expecting = CurlCommandRenderer.render(asking)
        XCTAssertFalse(expecting.contains("-H Expect:"), expecting)
        XCTAssertTrue(expecting.contains("-H 'expect: 100-continue'"), expecting)
    }

    func testThatBidirectionalControlsAreWrittenAsBytesNotSentToTheTerminal() {
        XCTAssertEqual(CurlCommandRenderer.quote("my\u{202E}txt.exe"), "$'my\\xE2\\x80\\xAEtxt.exe'")
        XCTAssertEqual(CurlCommandRenderer.quote("שלום.txt"), "שלום.txt", "right-to-left letters stay")
    }

    func testThatTheRequestTargetIsTheURLsTextAsLibcurlSendsIt() {
        XCTAssertEqual(
            CurlCommandRenderer.requestTargetCurlWouldChange("http://h:1/put/dir/?q=1&b=[2]#frag"),
            "/put/dir/?q=1&b=[2]")
        XCTAssertEqual(CurlCommandRenderer.requestTargetCurlWouldChange("http://h"), "/")
        XCTAssertEqual(CurlCommandRenderer.requestTargetCurlWouldChange("http://u:p@h?x=1"), "/?x=1")
        XCTAssertNil(CurlCommandRenderer.requestTargetCurlWouldChange("http://h/file.bin?x=/"))
    }

    func testThatTextFormPartsAreFormStringsAndFilePartsNameTheirType() {
        var r = upload("off")
        r.request.source = nil
        r.request.form = ["title=<lt.txt", "msg=a;b", "f=@/tmp/p.jpg"]
        r.method = "POST"
        let cmd = CurlCommandRenderer.render(r)
        XCTAssertTrue(cmd.contains("--form-string 'title=<lt.txt'"), cmd)
        XCTAssertTrue(cmd.contains("--form-string 'msg=a;b'"), cmd)
        XCTAssertTrue(cmd.contains("-F 'f=@/tmp/p.jpg;type=image/jpeg'"), cmd)
        XCTAssertFalse(cmd.contains("Content-Type"), "curl sets the multipart type itself: \(cmd)")
    }
}
