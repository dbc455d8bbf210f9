import XCTest

@testable import TransferBase
@testable import TransferCore

final class HeaderFieldTests: XCTestCase {
    func testThatANameAndATrimmedValueAreParsed() throws {
        XCTAssertEqual(try HeaderField.parse("Accept: text/html"), HeaderField(name: "Accept", value: "text/html"))
        XCTAssertEqual(
            try HeaderField.parse("X-A:\t  spaced value \t"), HeaderField(name: "X-A", value: "spaced value"))
        XCTAssertEqual(try HeaderField.parse("X-A:b"), HeaderField(name: "X-A", value: "b"))
    }

    func testThatOnlyTheFirstColonSeparatesNameAndValue() throws {
        XCTAssertEqual(
            try HeaderField.parse("Referer: http://h:8080/x"), HeaderField(name: "Referer", value: "http://h:8080/x"))
    }

    func testThatAnEmptyValueIsAllowed() throws {
        XCTAssertEqual(try HeaderField.parse("X-Empty:"), HeaderField(name: "X-Empty", value: ""))
        XCTAssertEqual(try HeaderField.parse("X-Empty:   "), HeaderField(name: "X-Empty", value: ""))
    }

    func testThatAllTokenCharactersAreAllowedInTheName() throws {
        let name = "!#$%&'*+-.^_`|~09azAZ"
        XCTAssertEqual(try HeaderField.parse("\(name): v").name, name)
    }

    func testThatAMissingColonIsRefused() {
        assertRefused("Accept text/html")
        assertRefused("")
    }

    func testThatHeadersTheDaemonWritesItselfAreRefusedInAnyCase() {
        for line in [
            "Content-Length: 1", "transfer-encoding: chunked", "RANGE: bytes=0-9", "If-Range: \"e\"",
            "Upload-Offset: 0", "Tus-Resumable: 1.0.0",
        ] {
            assertRefused(line)
        }
        XCTAssertNoThrow(try HeaderField.parse("Content-Type: text/plain"))
        XCTAssertNoThrow(try HeaderField.parse("Host: example.com"))
    }

    func testThatAnEmptyNameIsRefused() {
        assertRefused(": value")
    }

    func testThatNonTokenCharactersInTheNameAreRefused() {
        for line in [
            "Bad Name: v", "Bad\tName: v", "Name : v", " Name: v", "Na\"me: v", "Na(me): v", "Näme: v", "Na/me: v",
            "Na@me: v",
        ] {
            assertRefused(line)
        }
    }

    func testThatCRLFAndNULAreRefusedInNameOrValue() {
        for line in ["X-A: b\r\nX-Injected: 1", "X-A: b\n", "X-A: b\r", "X-A: b\0c", "X\r\nA: b", "X\0: b"] {
            assertRefused(line)
        }
    }

    func testThatOtherControlCharactersAreRefusedInTheValueButTabIsKept() throws {
        assertRefused("X-A: b\u{7}c")
        assertRefused("X-A: b\u{7F}")
        XCTAssertEqual(try HeaderField.parse("X-A: b\tc").value, "b\tc")
    }

    func testThatARefusalNeverEchoesTheValue() {
        do {
            _ = try HeaderField.parse("Authorization Bearer s3cr3t")
            XCTFail("expected a refusal")
        } catch let error as TransferError {
            XCTAssertFalse(error.message.contains("s3cr3t"))
        } catch {
            XCTFail("unexpected \(error)")
        }
        do {
            _ = try HeaderField.parse("Authorization: s3cr3t\r\n")
            XCTFail("expected a refusal")
        } catch let error as TransferError {
            XCTAssertFalse(error.message.contains("s3cr3t"))
        } catch {
            XCTFail("unexpected \(error)")
        }
    }

    func testThatAuthorizationProxyAuthorizationAndCookieAreSecretInAnyCase() throws {
        XCTAssertTrue(try HeaderField.parse("Authorization: Bearer x").isSecret)
        XCTAssertTrue(try HeaderField.parse("authorization: Bearer x").isSecret)
        XCTAssertTrue(try HeaderField.parse("PROXY-AUTHORIZATION: Basic x").isSecret)
        XCTAssertTrue(try HeaderField.parse("Cookie: a=b").isSecret)
        XCTAssertFalse(try HeaderField.parse("Accept: */*").isSecret)
        XCTAssertFalse(try HeaderField.parse("X-Cookie: a").isSecret)
    }

    func testThatTheRedactedLineHidesOnlySecrets() {
        XCTAssertEqual(HeaderField(name: "Cookie", value: "a=b").redactedLine, "Cookie: ***")
        XCTAssertEqual(HeaderField(name: "Accept", value: "*/*").redactedLine, "Accept: */*")
        XCTAssertEqual(HeaderField(name: "Cookie", value: "a=b").line, "Cookie: a=b")
    }

    private func assertRefused(_ line: String, file: StaticString = #filePath, line number: UInt = #line) {
        XCTAssertThrowsError(
            try HeaderField.parse(line), "\(line.debugDescription) should be refused", file: file, line: number
        ) {
            error in
            XCTAssertEqual((error as? TransferError)?.code, .invalidRequest, file: file, line: number)
            XCTAssertEqual((error as? TransferError)?.retryable, false, file: file, line: number)
        }
    }
}
