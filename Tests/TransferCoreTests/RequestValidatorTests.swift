import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

#if canImport(Glibc)
    import Glibc
#endif

final class RequestValidatorTests: XCTestCase {
    private var root = ""

    override func setUpWithError() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("aft-validator-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        root = dir.path
        try mkdir("dir")
        try write("file.txt")
        try write("cert.pem", Self.certificate)
        try write("damaged.pem", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    }

    /// A real certificate (self-signed, P-256, valid until 2126): the files are read by OpenSSL.
    static let certificate = """
        -----BEGIN CERTIFICATE-----
        MIIBjDCCATGgAwIBAgIUCLDCSsKd8ekdE3UOkcnipV1l1oowCgYIKoZIzj0EAwIw
        GjEYMBYGA1UEAwwPYWZ0cmFuc2ZlciB0ZXN0MCAXDTI2MTEyNzIyNDQxNVoYDzIx
        MjYxMTAzMjI0NDE1WjAaMRgwFgYDVQQDDA9hZnRyYW5zZmVyIHRlc3QwWTATBgcq
        hkjOPQIBBggqhkjOPQMBBwNCAAQ7TFzZWsxO0BqJrx1bQMbzWu51QBzq24gwZdMm
        ZlCug9+qxvQTbUu4N/+Qs3zwfzJrfI6WB3acKmuGV+hV3BF4o1MwUTAdBgNVHQ4E
        FgQUmAV9VELCsGurAoeToHnV9iCIyTgwHwYDVR0jBBgwFoAUmAV9VELCsGurAoeT
        oHnV9iCIyTgwDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNJADBGAiEAz8X/
        f+4NbwFZ9W27j2ntjxSjHLDlVjB/0S8p+20j7UcCIQC3QCubEG8O00IZGbZAXDm7
        yQC7+QfBUHwkzII26pqRrA==
        -----END CERTIFICATE-----
        """

    override func tearDownWithError() throws {
        if !root.isEmpty {
            _ = chmod(root + "/unreadable.txt", 0o644)
            try FileManager.default.removeItem(atPath: root)
        }
    }

    // MARK: Fixtures

    private func path(_ name: String) -> String { root + "/" + name }

    private func mkdir(_ name: String) throws {
        try FileManager.default.createDirectory(atPath: path(name), withIntermediateDirectories: true)
    }

    private func write(_ name: String, _ text: String = "hello") throws {
        try Data(text.utf8).write(to: URL(fileURLWithPath: path(name)))
    }

    private func download(_ url: String = "https://example.com/x", to destination: String? = nil) -> TransferRequest {
        var r = TransferRequest(url: url)
        r.destination = destination ?? path("out.bin")
        return r
    }

    private func upload(_ url: String = "https://example.com/up") -> TransferRequest {
        var r = TransferRequest(url: url)
        r.kind = "upload"
        r.source = path("file.txt")
        return r
    }

    private func assertRefused(
        _ request: TransferRequest, _ code: TransferErrorCode = .invalidRequest, mentioning field: String,
        file: StaticString = #filePath, line: UInt = #line
    ) {
        XCTAssertThrowsError(try RequestValidator.validate(request, certificates: nil), file: file, line: line) {
            error in
            guard let refusal = error as? TransferError else {
                return XCTFail("not a TransferError: \(error)", file: file, line: line)
            }
            XCTAssertEqual(refusal.code, code, refusal.message, file: file, line: line)
            XCTAssertFalse(refusal.retryable, file: file, line: line)
            XCTAssertTrue(
                refusal.message.hasPrefix(field), "\"\(refusal.message)\" should name \(field)", file: file, line: line)
        }
    }

    // MARK: lists

    func testThatAListLooksAtEachDirectoryOnce() throws {
        var known = Set<String>()
        var first = TransferRequest(url: "https://example.com/a")
        first.directory = path("dir")
        _ = try RequestValidator.validate(first, knownDirectories: &known, certificates: nil)
        _ = try RequestValidator.validate(download(to: path("dir/b.bin")), knownDirectories: &known, certificates: nil)
        XCTAssertEqual(known, [path("dir")])
        // Known, it is not looked at again for the rest of the list...
        try FileManager.default.removeItem(atPath: path("dir"))
        var second = first
        second.url = "https://example.com/c"
        XCTAssertNoThrow(try RequestValidator.validate(second, knownDirectories: &known, certificates: nil))
        // ...but a request on its own, or another list, looks.
        assertRefused(second, .destinationMissingDir, mentioning: "directory")
        var fresh = Set<String>()
        XCTAssertThrowsError(try RequestValidator.validate(second, knownDirectories: &fresh, certificates: nil))
        XCTAssertTrue(fresh.isEmpty)
    }

    func testThatAFileIsNeverTakenForAKnownDirectory() throws {
        var known = Set<String>()
        var request = TransferRequest(url: "https://example.com/a")
        request.directory = path("file.txt")
        XCTAssertThrowsError(try RequestValidator.validate(request, knownDirectories: &known, certificates: nil))
        XCTAssertTrue(known.isEmpty)
    }

    // MARK: kind

    func testThatKindDefaultsToDownload() throws {
        XCTAssertEqual(try RequestValidator.validate(download(), certificates: nil).kind, "download")
    }

    func testThatKindIsNormalizedAndOtherKindsAreRefused() throws {
        var r = download()
        r.kind = "DOWNLOAD"
        XCTAssertEqual(try RequestValidator.validate(r, certificates: nil).kind, "download")
        r.kind = "sync"
        assertRefused(r, mentioning: "kind")
    }

    // MARK: url

    func testThatTheURLIsTrimmedAndItsSchemeLowercased() throws {
        let r = try RequestValidator.validate(download("  HTTPS://Example.com/A?b=C \n"), certificates: nil)
        XCTAssertEqual(r.url, "https://Example.com/A?b=C")
    }

    func testThatOnlyHTTPAndHTTPSAreAccepted() throws {
        XCTAssertNoThrow(try RequestValidator.validate(download("http://example.com/x"), certificates: nil))
        for url in [
            "ftp://example.com/x", "file:///etc/passwd", "gopher://h/", "javascript:alert(1)", "example.com/x", "//h/x",
        ] {
            assertRefused(download(url), mentioning: "url")
        }
    }

    func testThatAURLWithoutAHostIsRefused() {
        for url in [
            "http://", "http:///x", "https://:80/x", "http:example.com", "http:/example.com/x", "http://user@/x",
        ] {
            assertRefused(download(url), mentioning: "url")
        }
    }

    func testThatSpacesAndControlCharactersInTheURLAreRefused() {
        for url in [
            "http://h/a b", "http://h/a\tb", "http://h/a\r\nHost: evil", "http://h/\0", "http://h/a\u{7F}", "", "   ",
        ] {
            assertRefused(download(url), mentioning: "url")
        }
    }

    func testThatAnOverlongURLIsRefused() throws {
        let base = "https://example.com/"
        let fits = base + String(repeating: "a", count: RequestValidator.maxURLBytes - base.utf8.count)
        XCTAssertNoThrow(try RequestValidator.validate(download(fits), certificates: nil))
        assertRefused(download(fits + "a"), mentioning: "url")
    }

    func testThatAnOutOfRangePortIsRefused() {
        assertRefused(download("http://h:0/x"), mentioning: "url")
        assertRefused(download("http://h:65536/x"), mentioning: "url")
        XCTAssertNoThrow(try RequestValidator.validate(download("http://h:65535/x"), certificates: nil))
        // Digits too many for an integer: Foundation then reports no port at all.
        assertRefusedURL("http://127.0.0.1:99999999999999999999/x", saying: "port out of range")
        assertRefusedURL("http://h:18446744073709551617", saying: "port out of range")
        for fine in ["http://h:/x", "http://h:00080/x", "http://u:p@h:8080?q", "http://[::1]:8080/x", "http://[::1]"] {
            XCTAssertNoThrow(try RequestValidator.validate(download(fine), certificates: nil), fine)
        }
    }

    private func assertRefusedURL(_ url: String, saying words: String, line: UInt = #line) {
        assertRefused(download(url), mentioning: "url", line: line)
        XCTAssertThrowsError(try RequestValidator.validate(download(url), certificates: nil), line: line) { error in
            let message = (error as? TransferError)?.message ?? ""
            XCTAssertTrue(words.isEmpty || message.contains(words), message, line: line)
        }
    }

    func testThatAHostLibcurlWouldRefuseIsRefused() {
        assertRefusedURL("http://[zz::1]/x", saying: "IPv6")
        assertRefusedURL("http://[::1]x/x", saying: "")
        assertRefusedURL("http://u:pw@@localhost/a", saying: "second @")
        assertRefusedURL("http://a@b@localhost/a", saying: "second @")
        XCTAssertNoThrow(try RequestValidator.validate(download("http://u:p%40w@localhost/a"), certificates: nil))
        for bad in ["http://a%20b/x", "http://a%2Fb/x", "http://a%zz/x", "http://a$b/x", "http://a(b)/x"] {
            assertRefusedURL(bad, saying: bad.contains("%zz") ? "" : "host name")
        }
        for fine in [
            "http://b%C3%BCcher.example/x", "http://bücher.example/x", "http://a_b-c.example/x",
            "http://[fe80::1%25lo]/",
        ] {
            XCTAssertNoThrow(try RequestValidator.validate(download(fine), certificates: nil), fine)
        }
    }

    func testThatARefusedURLMessageHidesThePassword() {
        XCTAssertThrowsError(try RequestValidator.validate(download("http://me:s3cr3t@/x"), certificates: nil)) {
            error in
            XCTAssertFalse((error as? TransferError)?.message.contains("s3cr3t") ?? true)
        }
    }

    // MARK: method

    func testThatADownloadUsesGET() throws {
        XCTAssertEqual(try RequestValidator.validate(download(), certificates: nil).method, "GET")
        var r = download()
        r.method = "get"
        XCTAssertEqual(try RequestValidator.validate(r, certificates: nil).method, "GET")
        for method in ["POST", "PUT", "HEAD", ""] {
            r.method = method
            assertRefused(r, mentioning: "method")
        }
    }

    func testThatAnUploadDefaultsToPUTOrToPOSTForAForm() throws {
        XCTAssertEqual(try RequestValidator.validate(upload(), certificates: nil).method, "PUT")
        var form = upload()
        form.source = nil
        form.form = ["a=b"]
        XCTAssertEqual(try RequestValidator.validate(form, certificates: nil).method, "POST")
        form.method = "put"
        XCTAssertEqual(try RequestValidator.validate(form, certificates: nil).method, "PUT")
    }

    func testThatAnUploadAcceptsOnlyPUTOrPOST() throws {
        var r = upload()
        r.method = "post"
        XCTAssertEqual(try RequestValidator.validate(r, certificates: nil).method, "POST")
        for method in ["GET", "PATCH", "DELETE"] {
            r.method = method
            assertRefused(r, mentioning: "method")
        }
    }

    // MARK: paths

    func testThatEveryPathMustBeAbsolute() {
        assertRefused(download(to: "out.bin"), mentioning: "destination")
        var r = download()
        r.destination = nil
        r.directory = "dir"
        assertRefused(r, mentioning: "directory")
        var u = upload()
        u.source = "file.txt"
        assertRefused(u, mentioning: "source")
        u = upload()
        u.response = "resp.txt"
        assertRefused(u, mentioning: "response")
        r = download()
        r.cacert = "cert.pem"
        assertRefused(r, mentioning: "cacert")
        r = download()
        r.pinCert = ""
        assertRefused(r, mentioning: "pinCert")
        u = upload()
        u.source = nil
        u.form = ["f=@file.txt"]
        assertRefused(u, mentioning: "form")
    }

    func testThatAPathWithNULIsRefused() {
        assertRefused(download(to: path("a\0b")), mentioning: "destination")
        var u = upload()
        u.source = path("file.txt") + "\0.x"
        assertRefused(u, mentioning: "source")
    }

    // MARK: downloads

    func testThatADownloadNeedsExactlyOneOfDestinationAndDirectory() {
        var r = download()
        r.destination = nil
        assertRefused(r, mentioning: "destination")
        r = download()
        r.directory = path("dir")
        assertRefused(r, mentioning: "destination")
    }

    func testThatAValidDownloadIsReturnedUnchangedButNormalized() throws {
        var r = download()
        r.replace = false
        r.headers = ["Accept: */*"]
        r.limitRate = "2M"
        let v = try RequestValidator.validate(r, certificates: nil)
        XCTAssertEqual(v.destination, path("out.bin"))
        XCTAssertEqual(v.headers, ["Accept: */*"])
        XCTAssertEqual(v.limitRate, "2M")
        XCTAssertEqual(v.replace, false)
    }

    func testThatADownloadRefusesAnotherContentCodingButAnUploadMayAskForOne() throws {
        // SPEC: downloads ask for identity; another -H Accept-Encoding was silently replaced.
        var r = download()
        r.headers = ["Accept-Encoding: gzip"]
        assertRefused(r, mentioning: "header Accept-Encoding")
        for same in ["accept-encoding: Identity", "Accept-Encoding: identity;q=1", "Accept-Encoding:"] {
            r.headers = [same]
            XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil), same)
        }
        r.headers = ["Accept-Encoding: identity, gzip"]
        assertRefused(r, mentioning: "header Accept-Encoding")
        var u = upload()
        u.headers = ["Accept-Encoding: gzip"]
        XCTAssertNoThrow(try RequestValidator.validate(u, certificates: nil))
    }

    func testThatADestinationThatIsADirectoryIsRefused() {
        assertRefused(download(to: path("dir")), mentioning: "destination")
        assertRefused(download(to: path("dir") + "/"), mentioning: "destination")
        assertRefused(download(to: path("nowhere") + "/"), mentioning: "destination")
        assertRefused(download(to: "/"), mentioning: "destination")
        var r = download(to: path("dir"))
        r.replace = true
        assertRefused(r, mentioning: "destination")
    }

    func testThatAnExistingDestinationNeedsReplace() throws {
        assertRefused(download(to: path("file.txt")), .destinationExists, mentioning: "destination")
        var r = download(to: path("file.txt"))
        r.replace = true
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
    }

    func testThatADanglingSymlinkCountsAsAnExistingDestination() throws {
        try FileManager.default.createSymbolicLink(
            atPath: path("dangling"), withDestinationPath: path("missing-target"))
        assertRefused(download(to: path("dangling")), .destinationExists, mentioning: "destination")
    }

    func testThatAMissingDestinationDirectoryNeedsCreateDirs() throws {
        let deep = path("new/sub/out.bin")
        assertRefused(download(to: deep), .destinationMissingDir, mentioning: "destination")
        var r = download(to: deep)
        r.createDirs = true
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        XCTAssertFalse(FileManager.default.fileExists(atPath: path("new")), "validation must not create anything")
    }

    func testThatADestinationUnderAFileIsAMissingDirectory() {
        assertRefused(download(to: path("file.txt/out.bin")), .destinationMissingDir, mentioning: "destination")
        var r = download(to: path("file.txt/sub/out.bin"))
        r.createDirs = true
        assertRefused(r, .destinationMissingDir, mentioning: "destination")
    }

    func testThatADirectoryMustExistUnlessCreateDirs() throws {
        var r = download()
        r.destination = nil
        r.directory = path("dir")
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        r.directory = path("newdir/sub")
        assertRefused(r, .destinationMissingDir, mentioning: "directory")
        r.createDirs = true
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        r.directory = path("file.txt/sub")
        assertRefused(r, .destinationMissingDir, mentioning: "directory")
    }

    func testThatADirectoryThatIsAFileIsRefused() {
        var r = download()
        r.destination = nil
        r.directory = path("file.txt")
        assertRefused(r, mentioning: "directory")
    }

    func testThatUploadFieldsAreRefusedOnADownload() throws {
        var r = download()
        r.source = path("file.txt")
        assertRefused(r, mentioning: "source")
        r = download()
        r.form = ["a=b"]
        assertRefused(r, mentioning: "form")
        r = download()
        r.response = path("resp.txt")
        assertRefused(r, mentioning: "response")
        r = download()
        r.form = []
        XCTAssertNil(try RequestValidator.validate(r, certificates: nil).form)
    }

    // MARK: uploads

    func testThatAValidUploadPasses() throws {
        let v = try RequestValidator.validate(upload(), certificates: nil)
        XCTAssertEqual(v.kind, "upload")
        XCTAssertEqual(v.source, path("file.txt"))
    }

    func testThatAnUploadNeedsExactlyOneOfSourceAndForm() {
        var r = upload()
        r.source = nil
        assertRefused(r, mentioning: "source")
        r.form = []
        assertRefused(r, mentioning: "source")
        r = upload()
        r.form = ["a=b"]
        assertRefused(r, mentioning: "source")
    }

    func testThatTheSourceMustBeAnExistingRegularFile() throws {
        var r = upload()
        r.source = path("missing.txt")
        assertRefused(r, mentioning: "source")
        r.source = path("dir")
        assertRefused(r, mentioning: "source")
        XCTAssertEqual(mkfifo(path("fifo"), 0o600), 0)
        r.source = path("fifo")
        assertRefused(r, mentioning: "source")
    }

    func testThatAnUnreadableSourceIsRefused() throws {
        try XCTSkipIf(getuid() == 0, "root can read any file")
        try write("unreadable.txt")
        XCTAssertEqual(chmod(path("unreadable.txt"), 0), 0)
        var r = upload()
        r.source = path("unreadable.txt")
        assertRefused(r, mentioning: "source")
    }

    func testThatFormPartsAreParsedAndTheirFilesChecked() throws {
        var r = upload()
        r.source = nil
        r.form = ["title=Hi", "doc=@\(path("file.txt"));type=text/plain"]
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        r.form = ["title=Hi", "doc=@\(path("missing.txt"))"]
        assertRefused(r, mentioning: "form doc")
        r.form = ["doc=@\(path("dir"))"]
        assertRefused(r, mentioning: "form doc")
        r.form = ["novalue"]
        assertRefused(r, mentioning: "form")
        r.form = ["doc=@\(path("file.txt"));type=nonsense"]
        assertRefused(r, mentioning: "form doc")
    }

    func testThatTheResponseFileFollowsTheDestinationRules() throws {
        var r = upload()
        r.response = path("resp.txt")
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        r.response = path("file.txt")
        assertRefused(r, .destinationExists, mentioning: "response")
        r.replace = true
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        r.response = path("dir")
        assertRefused(r, mentioning: "response")
        r.response = path("nodir/resp.txt")
        assertRefused(r, .destinationMissingDir, mentioning: "response")
    }

    func testThatDownloadFieldsAreRefusedOnAnUpload() {
        var r = upload()
        r.destination = path("out.bin")
        assertRefused(r, mentioning: "destination")
        r = upload()
        r.directory = path("dir")
        assertRefused(r, mentioning: "directory")
    }

    // MARK: options

    func testThatEveryHeaderMustParse() throws {
        var r = download()
        r.headers = ["Accept: */*", "Authorization: Bearer x"]
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        for bad in ["NoColon", ": empty", "Bad Name: v", "X-A: b\r\nX-B: c"] {
            r.headers = ["Accept: */*", bad]
            assertRefused(r, mentioning: "header")
        }
    }

    func testThatUserNeedsAColonAndNoLineBreaks() throws {
        var r = download()
        r.user = "me:secret"
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        r.user = "me:"
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        for bad in ["me", "", "me:se\ncret", "me:se\rcret", "me:se\0cret"] {
            r.user = bad
            assertRefused(r, mentioning: "user")
        }
    }

    func testThatSHA256IsSixtyFourHexDigitsAndLowercased() throws {
        var r = download()
        r.sha256 = String(repeating: "AbC0", count: 16)
        XCTAssertEqual(try RequestValidator.validate(r, certificates: nil).sha256, String(repeating: "abc0", count: 16))
        for bad in [
            "", "abc", String(repeating: "a", count: 63), String(repeating: "a", count: 65),
            String(repeating: "g", count: 64),
        ] {
            r.sha256 = bad
            assertRefused(r, mentioning: "sha256")
        }
    }

    func testThatPriorityIsBounded() throws {
        var r = download()
        for ok in [-1_000_000, -1, 0, 1_000_000] {
            r.priority = ok
            XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        }
        for bad in [-1_000_001, 1_000_001, Int.max, Int.min] {
            r.priority = bad
            assertRefused(r, mentioning: "priority")
        }
    }

    func testThatLimitRateMustParse() throws {
        var r = download()
        r.limitRate = "500K"
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        for bad in ["", "0", "-1K", "fast"] {
            r.limitRate = bad
            assertRefused(r, mentioning: "limitRate")
        }
    }

    func testThatRetriesIsBounded() throws {
        var r = download()
        for ok in [0, 8, 1000] {
            r.retries = ok
            XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        }
        for bad in [-1, 1001] {
            r.retries = bad
            assertRefused(r, mentioning: "retries")
        }
    }

    func testThatCertificateFilesMustExistAndBeFiles() throws {
        var r = download()
        r.cacert = path("cert.pem")
        r.pinCert = path("cert.pem")
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        r.cacert = path("damaged.pem")
        // Only with a reader of certificates (the daemon's, OpenSSL): the CLI links none.
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        XCTAssertThrowsError(try RequestValidator.validate(r, certificates: PEMCertificates.count(in:))) { error in
            XCTAssertEqual((error as? TransferError)?.code, .invalidRequest)
            XCTAssertTrue((error as? TransferError)?.message.contains("cacert") == true, "\(error)")
            XCTAssertTrue((error as? TransferError)?.message.contains("cannot be read") == true, "\(error)")
        }
        r.cacert = path("missing.pem")
        assertRefused(r, mentioning: "cacert")
        r.cacert = path("dir")
        assertRefused(r, mentioning: "cacert")
        r.cacert = nil
        r.pinCert = path("missing.pem")
        assertRefused(r, mentioning: "pinCert")
    }

    func testThatACertificateFileWithoutAPEMCertificateIsRefused() throws {
        try write("not.pem", "{\"json\": true}")
        var r = download()
        r.cacert = path("not.pem")
        assertRefused(r, mentioning: "cacert")
        XCTAssertThrowsError(try RequestValidator.validate(r, certificates: nil)) {
            XCTAssertTrue("\($0)".contains("no PEM certificate"))
        }
        r.cacert = nil
        r.pinCert = path("not.pem")
        assertRefused(r, mentioning: "pinCert")
    }

    func testThatPinPubkeyIsOneOrMoreSHA256Pins() throws {
        let pin = "sha256//" + Data(repeating: 7, count: 32).base64EncodedString()
        let other = "sha256//" + Data(repeating: 9, count: 32).base64EncodedString()
        var r = download()
        r.pinPubkey = pin
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        r.pinPubkey = "\(pin);\(other)"
        XCTAssertNoThrow(try RequestValidator.validate(r, certificates: nil))
        for bad in [
            "", pin + ";", "sha1//" + Data(repeating: 7, count: 20).base64EncodedString(),
            "sha256//" + Data(repeating: 7, count: 31).base64EncodedString(), "sha256//not base64!", "sha256//",
            Data(repeating: 7, count: 32).base64EncodedString(),
        ] {
            r.pinPubkey = bad
            assertRefused(r, mentioning: "pinPubkey")
        }
    }

    // MARK: resumable

    func testThatResumableIsNormalizedForUploadsAndRefusedElsewhere() throws {
        try write("file.txt")
        var r = upload()
        r.resumable = "TUS"
        XCTAssertEqual(try RequestValidator.validate(r, certificates: nil).resumable, "tus")
        r.resumable = "sometimes"
        assertRefused(r, mentioning: "resumable")
        var form = upload()
        form.source = nil
        form.form = ["f=@" + path("file.txt")]
        form.resumable = "tus"
        assertRefused(form, mentioning: "resumable")
        form.resumable = nil
        form.sha256 = String(repeating: "0", count: 64)
        assertRefused(form, mentioning: "sha256")
        var d = download()
        d.resumable = "auto"
        assertRefused(d, mentioning: "resumable")
    }
}
