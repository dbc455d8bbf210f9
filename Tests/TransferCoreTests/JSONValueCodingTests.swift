import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

/// ``JSONParser``, ``JSONValueDecoder`` and ``JSONValueEncoder`` against Foundation's JSON coders:
/// the same values and the same refusals, without JSON text in between.
final class JSONValueCodingTests: XCTestCase {
    /// What Foundation made of a text (the daemon's parser before ``JSONParser``).
    private func foundation(_ text: String) -> JSONValue? {
        try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8))
    }

    func testThatTheParserMakesTheValuesJSONDecoderMakes() throws {
        let texts = [
            "null", "true", "false", "0", "-0", "1.0", "1e2", "1E2", "1.5", "-2.25e-3", "99999999999999999999",
            "9223372036854775807", "-9223372036854775808", "123456789012345678.0", "123456789012345678",
            "-123456789012345678", "1234567890123456789", "-999999999999999999", "[0,-0,7,-7]", #""""#,
            #""a\"b\\c\/d""#,
            #""\u00e9\u0000\n\t\b\f\r""#, #""\ud83d\ude00""#, "\"héllo €\"", "[]", "{}",
            " [1, [2, [3]], {\"a\": null}] ",
            #"{"jsonrpc":"2.0","id":7,"method":"transfer.add","params":{"url":"http://h/f","priority":-3}}"#,
        ]
        for text in texts {
            XCTAssertEqual(try JSONParser.parse(Array(text.utf8)), foundation(text), text)
        }
    }

    func testThatTheParserRefusesWhatJSONDecoderRefuses() {
        let texts = [
            "", " ", "01", "1.", ".5", "-", "+1", "1e", "1e400", "-1e400", "tru", "nul",
            "[1] x", "{\"a\" 1}", "{a:1}", "'a'", "\"\u{07}\"", "\"a", #""\x""#, #""\ud800""#, #""\udc00""#,
            "[" + String(repeating: "[", count: 600) + String(repeating: "]", count: 601),
        ]
        for text in texts {
            XCTAssertThrowsError(try JSONParser.parse(Array(text.utf8)), text)
            XCTAssertNil(foundation(text), "Foundation accepts \(text)")
        }
        // Stricter than Foundation, as RFC 8259 is: no trailing comma, no member named twice.
        for text in ["[1,]", "{\"a\":1,}", #"{"a":1,"a":2}"#] {
            XCTAssertThrowsError(try JSONParser.parse(Array(text.utf8)), text)
        }
        XCTAssertThrowsError(try JSONParser.parse([0x22, 0xFF, 0xFE, 0x22]), "invalid UTF-8")
        XCTAssertThrowsError(try JSONParser.parse([0x22, 0x61, 0xF0, 0x9F, 0x98, 0x22]), "a truncated sequence")
        XCTAssertThrowsError(try JSONParser.parse([0x22, 0x61, 0x00, 0x22]), "a raw NUL")
    }

    func testThatNestingUpToTheLimitIsAcceptedAndOneMoreIsNot() throws {
        let depth = JSONParser.maximumDepth
        XCTAssertNoThrow(
            try JSONParser.parse(
                Array((String(repeating: "[", count: depth) + String(repeating: "]", count: depth)).utf8)))
        XCTAssertThrowsError(
            try JSONParser.parse(
                Array((String(repeating: "[", count: depth + 1) + String(repeating: "]", count: depth + 1)).utf8)))
    }

    private func request() -> TransferRequest {
        var r = TransferRequest(url: "http://user:pw@h/a b/f?x=1&y=/z")
        r.kind = "upload"
        r.headers = ["X-A: 1", "X-B: \"quoted\""]
        r.priority = -4
        r.retries = 0
        r.replace = true
        r.form = ["name=value", "file=@/tmp/x;type=text/plain"]
        r.limitRate = "1.5M"
        return r
    }

    func testThatEncodingIntoATreeGivesWhatJSONEncoderAndJSONDecoderGive() throws {
        let direct = try JSONValueEncoder().encode(request())
        let viaText = try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(request()))
        XCTAssertEqual(direct, viaText)
        let snapshot = JobSnapshot(
            id: 3, kind: .download, url: "http://h/f", method: "GET", state: .failed, destination: "/tmp/f",
            bytes: 10, total: nil, fraction: nil, rate: 1.25, eta: nil, attempts: 2, httpStatus: 404,
            error: TransferError(.httpStatus, "404"), waitReason: nil, nextRetryAt: nil, insecure: false,
            sha256: nil, createdAt: "c", updatedAt: "u", completedAt: nil,
            history: [AttemptRecord(attempt: 1, startedAt: "s", httpStatus: 404, bytes: 0, total: 0.5)])
        XCTAssertEqual(
            try JSONValueEncoder().encode(snapshot),
            try JSONDecoder().decode(JSONValue.self, from: JSONEncoder().encode(snapshot)))
    }

    func testThatDecodingFromATreeGivesWhatJSONDecoderGives() throws {
        let tree = try JSONValueEncoder().encode(request())
        XCTAssertEqual(try JSONValueDecoder().decode(TransferRequest.self, from: tree), request())
        let params = try JSONParser.parse(Array(#"{"requests":[{"url":"http://h/1"},{"url":"http://h/2"}]}"#.utf8))
        XCTAssertEqual(try params.decode(as: AddManyParams.self).requests.map(\.url), ["http://h/1", "http://h/2"])
    }

    func testThatAValueOfTheWrongTypeIsNamedByItsPath() {
        let params = try? JSONParser.parse(Array(#"{"requests":[{"url":"http://h/1"},{"url":7}]}"#.utf8))
        XCTAssertThrowsError(try params?.decode(as: AddManyParams.self)) { error in
            guard case DecodingError.typeMismatch(_, let context) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["requests", "Index 1", "url"])
        }
        XCTAssertThrowsError(try JSONValue.object(["id": .double(1.5)]).decode(as: GetParams.self))
        XCTAssertThrowsError(try JSONValue.object(["id": .string("1")]).decode(as: GetParams.self))
        XCTAssertThrowsError(try JSONValue.object([:]).decode(as: GetParams.self)) { error in
            guard case DecodingError.keyNotFound(let key, _) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(key.stringValue, "id")
        }
    }

    func testThatTheWriterWritesWhatTheParserReadsBack() throws {
        let value = try JSONValueEncoder().encode(request())
        var writer = JobJSONWriter()
        writer.value(value)
        XCTAssertEqual(try JSONParser.parse(writer.bytes), value)
        let sorted = try JSONEncoder.sorted.encode(value)
        XCTAssertEqual(String(decoding: writer.bytes, as: UTF8.self), String(decoding: sorted, as: UTF8.self))
    }
}

extension JSONEncoder {
    fileprivate static var sorted: JSONEncoder {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }
}
