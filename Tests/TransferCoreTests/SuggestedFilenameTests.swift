import XCTest

@testable import TransferBase
@testable import TransferCore

final class SuggestedFilenameTests: XCTestCase {
    // MARK: Content-Disposition

    func testThatFilenameStarWinsOverFilename() {
        XCTAssertEqual(
            SuggestedFilename.fromContentDisposition("attachment; filename=\"plain.txt\"; filename*=UTF-8''star.txt"),
            "star.txt")
    }

    func testThatFilenameStarIsPercentDecodedAsUTF8() {
        XCTAssertEqual(
            SuggestedFilename.fromContentDisposition("attachment; filename*=UTF-8''%E2%82%AC%20rates.txt"),
            "€ rates.txt")
        XCTAssertEqual(SuggestedFilename.fromContentDisposition("attachment; filename*=utf-8'en'a%20b"), "a b")
    }

    func testThatFilenameStarIsDecodedAsLatin1() {
        XCTAssertEqual(
            SuggestedFilename.fromContentDisposition("attachment; filename*=ISO-8859-1''caf%E9.txt"), "café.txt")
    }

    func testThatAnUndecodableFilenameStarFallsBackToFilename() {
        for header in [
            "attachment; filename*=UTF-8''%FF%FE; filename=ok.txt",  // invalid UTF-8
            "attachment; filename*=KOI8-R''abc; filename=ok.txt",  // unknown charset
            "attachment; filename*=UTF-8''%zz; filename=ok.txt",  // bad percent-encoding
            "attachment; filename*=noquotes; filename=ok.txt",  // not an ext-value
            "attachment; filename*=UTF-8''; filename=ok.txt",  // empty
        ] {
            XCTAssertEqual(SuggestedFilename.fromContentDisposition(header), "ok.txt", header)
        }
    }

    func testThatAQuotedFilenameIsUnescaped() {
        XCTAssertEqual(
            SuggestedFilename.fromContentDisposition(#"attachment; filename="a \"quoted\" name; with semicolon.txt""#),
            #"a "quoted" name; with semicolon.txt"#)
        XCTAssertEqual(SuggestedFilename.fromContentDisposition(#"attachment; filename="back\\slash""#), #"back\slash"#)
    }

    func testThatATokenFilenameIsAccepted() {
        XCTAssertEqual(SuggestedFilename.fromContentDisposition("attachment; filename=report.pdf"), "report.pdf")
        XCTAssertEqual(SuggestedFilename.fromContentDisposition("attachment;filename=report.pdf ;size=3"), "report.pdf")
        XCTAssertEqual(SuggestedFilename.fromContentDisposition("inline; FILENAME=Upper.pdf"), "Upper.pdf")
    }

    func testThatTheFirstOccurrenceOfAParameterCounts() {
        XCTAssertEqual(SuggestedFilename.fromContentDisposition("attachment; filename=a.txt; filename=b.txt"), "a.txt")
    }

    func testThatAnEmptyFilenameCountsAsAbsent() {
        XCTAssertNil(SuggestedFilename.fromContentDisposition("attachment; filename=\"\""))
        XCTAssertNil(SuggestedFilename.fromContentDisposition("attachment; filename="))
        XCTAssertNil(SuggestedFilename.fromContentDisposition("attachment"))
        XCTAssertNil(SuggestedFilename.fromContentDisposition(""))
        XCTAssertNil(SuggestedFilename.fromContentDisposition("attachment; name=\"field\""))
    }

    func testThatAnUnterminatedQuotedFilenameRunsToTheEnd() {
        XCTAssertEqual(SuggestedFilename.fromContentDisposition("attachment; filename=\"abc"), "abc")
    }

    // MARK: URL

    func testThatTheURLsLastSegmentIsPercentDecoded() {
        XCTAssertEqual(SuggestedFilename.fromURL("https://h/dir/file%20name.tar.gz?x=1#frag"), "file name.tar.gz")
        XCTAssertEqual(SuggestedFilename.fromURL("http://h:8080/a/b"), "b")
        XCTAssertEqual(SuggestedFilename.fromURL("http://h/%E2%82%AC"), "€")
    }

    func testThatAURLWithoutALastSegmentHasNoName() {
        XCTAssertNil(SuggestedFilename.fromURL("http://h/"))
        XCTAssertNil(SuggestedFilename.fromURL("http://h"))
        XCTAssertNil(SuggestedFilename.fromURL("http://h/dir/"))
        XCTAssertNil(SuggestedFilename.fromURL("http://h?x=/y"))
        XCTAssertNil(SuggestedFilename.fromURL("http://h/#/frag/name"))
    }

    func testThatUndecodablePercentEncodingIsKeptAsWritten() {
        XCTAssertEqual(SuggestedFilename.fromURL("http://h/a%FFb"), "a%FFb")
        XCTAssertEqual(SuggestedFilename.fromURL("http://h/100%"), "100%")
    }

    // MARK: Sanitizing

    func testThatSeparatorsBecomeUnderscores() {
        XCTAssertEqual(SuggestedFilename.sanitize("a/b\\c"), "a_b_c")
    }

    func testThatAPathTraversalBecomesOneHarmlessComponent() {
        XCTAssertEqual(SuggestedFilename.sanitize("../../etc/passwd"), "_.._etc_passwd")
        XCTAssertEqual(SuggestedFilename.sanitize("/etc/passwd"), "_etc_passwd")
        XCTAssertEqual(SuggestedFilename.sanitize("..\\..\\x"), "_.._x")
    }

    func testThatDotNamesAndEmptyNamesBecomeDownload() {
        for name in ["", ".", "..", "...", " ", " . .", "\0", "\u{1}\u{2}", ".\0."] {
            XCTAssertEqual(SuggestedFilename.sanitize(name), "download", name.debugDescription)
        }
    }

    func testThatLeadingDotsAndSpacesAreStrippedButInnerAndTrailingOnesKept() {
        XCTAssertEqual(SuggestedFilename.sanitize(".bashrc"), "bashrc")
        XCTAssertEqual(SuggestedFilename.sanitize(" . hidden name. "), "hidden name. ")
    }

    func testThatNULAndControlCharactersAreDropped() {
        XCTAssertEqual(SuggestedFilename.sanitize("a\0b\nc\r\td\u{7F}e\u{85}f"), "abcdef")
        XCTAssertEqual(SuggestedFilename.sanitize("\r\nname"), "name")
    }

    func testThatBidirectionalControlsAreDroppedSoANameReadsAsItIs() {
        // "invoice\u{202E}fdp.exe" shows as "invoiceexe.pdf" on a screen.
        XCTAssertEqual(SuggestedFilename.sanitize("invoice\u{202E}fdp.exe"), "invoicefdp.exe")
        XCTAssertEqual(
            SuggestedFilename.sanitize("a\u{200E}b\u{200F}c\u{202A}d\u{2066}e\u{2069}f\u{061C}g"), "abcdefg")
        XCTAssertEqual(SuggestedFilename.sanitize("שלום.txt"), "שלום.txt", "right-to-left letters stay")
    }

    func testThatControlCharactersCannotHideALeadingDot() {
        XCTAssertEqual(SuggestedFilename.sanitize("\0.hidden"), "hidden")
    }

    func testThatLongNamesAreCutTo255Bytes() {
        XCTAssertEqual(
            SuggestedFilename.sanitize(String(repeating: "a", count: 1000)), String(repeating: "a", count: 255))
    }

    func testThatTruncationNeverSplitsAMultibyteCharacter() {
        // "é" is 2 bytes: 127 of them are 254 bytes; a 128th would make 256.
        let cut = SuggestedFilename.sanitize(String(repeating: "é", count: 200))
        XCTAssertEqual(cut, String(repeating: "é", count: 127))
        XCTAssertEqual(cut.utf8.count, 254)
        // "€" is 3 bytes; "a" + 84 × "€" is 253 bytes, the 85th would make 256.
        let euro = SuggestedFilename.sanitize("a" + String(repeating: "€", count: 100))
        XCTAssertEqual(euro.utf8.count, 253)
        XCTAssertEqual(euro, "a" + String(repeating: "€", count: 84))
        // A 4-byte emoji at the boundary.
        let emoji = SuggestedFilename.sanitize(String(repeating: "a", count: 253) + "😀😀")
        XCTAssertEqual(emoji, String(repeating: "a", count: 253))
    }

    func testThatLengthIsCountedAfterStripping() {
        let name = String(repeating: ".", count: 10) + String(repeating: "b", count: 300)
        XCTAssertEqual(SuggestedFilename.sanitize(name), String(repeating: "b", count: 255))
    }

    // MARK: suggest

    func testThatTheHeaderNameWinsOverTheURL() {
        XCTAssertEqual(
            SuggestedFilename.suggest(
                contentDisposition: "attachment; filename=fromheader.txt", url: "http://h/fromurl.txt"),
            "fromheader.txt")
    }

    func testThatTheURLIsUsedWhenTheHeaderNamesNothing() {
        XCTAssertEqual(SuggestedFilename.suggest(contentDisposition: nil, url: "http://h/fromurl.txt"), "fromurl.txt")
        XCTAssertEqual(
            SuggestedFilename.suggest(contentDisposition: "attachment; filename=\"\"", url: "http://h/fromurl.txt"),
            "fromurl.txt")
        XCTAssertEqual(
            SuggestedFilename.suggest(contentDisposition: "inline", url: "http://h/fromurl.txt"), "fromurl.txt")
    }

    func testThatNothingUsableGivesDownload() {
        XCTAssertEqual(SuggestedFilename.suggest(contentDisposition: nil, url: "http://h/"), "download")
        XCTAssertEqual(
            SuggestedFilename.suggest(contentDisposition: "attachment; filename=..", url: "http://h/x"), "download")
    }

    func testThatHostileSuggestionsAreSanitized() {
        XCTAssertEqual(
            SuggestedFilename.suggest(contentDisposition: "attachment; filename*=UTF-8''%2e%2e%2fx", url: "http://h/y"),
            "_x")
        XCTAssertEqual(
            SuggestedFilename.suggest(
                contentDisposition: "attachment; filename=\"../../etc/passwd\"", url: "http://h/y"),
            "_.._etc_passwd")
        XCTAssertEqual(
            SuggestedFilename.suggest(contentDisposition: nil, url: "http://h/..%2F..%2Fetc%2Fpasswd"), "_.._etc_passwd"
        )
        XCTAssertEqual(SuggestedFilename.suggest(contentDisposition: nil, url: "http://h/%2e%2e"), "download")
        XCTAssertEqual(SuggestedFilename.suggest(contentDisposition: nil, url: "http://h/a%00b"), "ab")
        XCTAssertEqual(
            SuggestedFilename.suggest(contentDisposition: "attachment; filename*=UTF-8''%00", url: "http://h/y"),
            "download")
    }
}
