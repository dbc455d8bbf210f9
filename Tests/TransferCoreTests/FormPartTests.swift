import XCTest

@testable import TransferBase
@testable import TransferCore

final class FormPartTests: XCTestCase {
    func testThatANameAndValueIsAField() throws {
        XCTAssertEqual(try FormPart.parse("title=Hello world"), .field(name: "title", value: "Hello world"))
        XCTAssertEqual(try FormPart.parse("empty="), .field(name: "empty", value: ""))
        XCTAssertEqual(try FormPart.parse("eq=a=b"), .field(name: "eq", value: "a=b"))
        XCTAssertEqual(try FormPart.parse("multi=line\r\ntext"), .field(name: "multi", value: "line\r\ntext"))
    }

    func testThatAValueStartingWithAtIsAFile() throws {
        XCTAssertEqual(
            try FormPart.parse("doc=@/tmp/a.pdf"),
            .file(name: "doc", path: "/tmp/a.pdf", contentType: nil, filename: nil))
    }

    func testThatTypeAndFilenameOptionsAreParsedInAnyOrderAndCase() throws {
        let expected = FormPart.file(name: "img", path: "/tmp/x.bin", contentType: "image/png", filename: "pic.png")
        XCTAssertEqual(try FormPart.parse("img=@/tmp/x.bin;type=image/png;filename=pic.png"), expected)
        XCTAssertEqual(try FormPart.parse("img=@/tmp/x.bin;filename=pic.png;type=image/png"), expected)
        XCTAssertEqual(try FormPart.parse("img=@/tmp/x.bin;TYPE=image/png;FileName=pic.png"), expected)
    }

    func testThatATypeKeepsItsParameters() throws {
        XCTAssertEqual(
            try FormPart.parse("t=@/tmp/a.txt;type=text/plain;charset=utf-8"),
            .file(name: "t", path: "/tmp/a.txt", contentType: "text/plain;charset=utf-8", filename: nil))
    }

    func testThatSemicolonsThatStartNoOptionStayInThePath() throws {
        XCTAssertEqual(
            try FormPart.parse("f=@/tmp/a;b.txt;type=text/plain"),
            .file(name: "f", path: "/tmp/a;b.txt", contentType: "text/plain", filename: nil))
    }

    func testThatQuotedPathsAndValuesAreUnescaped() throws {
        XCTAssertEqual(
            try FormPart.parse(#"f=@"/tmp/a;type=b \"q\".txt";filename="n;x""#),
            .file(name: "f", path: #"/tmp/a;type=b "q".txt"#, contentType: nil, filename: "n;x"))
    }

    func testThatAMissingEqualsSignIsRefused() {
        assertRefused("novalue")
        assertRefused("")
    }

    func testThatABadNameIsRefused() {
        for spec in ["=value", "=@/tmp/x", "na\"me=v", "na\rme=v", "na\nme=v", "na\0me=v"] {
            assertRefused(spec)
        }
    }

    func testThatABadTypeIsRefused() {
        for spec in [
            "f=@/tmp/x;type=", "f=@/tmp/x;type=text", "f=@/tmp/x;type=/plain", "f=@/tmp/x;type=text/",
            "f=@/tmp/x;type=te xt/plain", "f=@/tmp/x;type=text/plain\r\nX-Evil: 1", "f=@/tmp/x;type=a/b/c",
            "f=@/tmp/x;type=text/plain;type=text/html",
        ] {
            assertRefused(spec)
        }
    }

    func testThatABadFileSpecIsRefused() {
        for spec in [
            "f=@", "f=@\"\"", "f=@/tmp/x;filename=", "f=@/tmp/x;filename=a\r\nb", "f=@\"/tmp/x", "f=@\"/tmp/x\"junk",
            "f=@/tmp/x;filename=a;filename=b", "f=@/tmp/x\0y", "f=v\0",
        ] {
            assertRefused(spec)
        }
    }

    func testThatTheSpecRoundTrips() throws {
        let parts: [FormPart] = [
            .field(name: "a", value: "b;type=c"),
            .file(name: "f", path: "/tmp/x", contentType: nil, filename: nil),
            .file(name: "f", path: "/tmp/a;type=b.txt", contentType: "text/plain;charset=utf-8", filename: "\"q\".txt"),
            .file(name: "f", path: "\"quoted\\path", contentType: "image/png", filename: "a;filename=b"),
        ]
        for part in parts {
            XCTAssertEqual(try FormPart.parse(part.spec), part, part.spec)
        }
    }

    func testThatPartsRoundTripThroughJSON() throws {
        let part = FormPart.file(name: "f", path: "/tmp/x", contentType: "a/b", filename: nil)
        let data = try JSONEncoder().encode(part)
        XCTAssertEqual(try JSONDecoder().decode(FormPart.self, from: data), part)
        XCTAssertEqual(part.name, "f")
    }

    private func assertRefused(_ spec: String, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try FormPart.parse(spec), spec.debugDescription, file: file, line: line) { error in
            XCTAssertEqual((error as? TransferError)?.code, .invalidRequest, file: file, line: line)
        }
    }
}
