import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

/// A request read member by member and written directly must give what `Codable` gives:
/// Foundation's `JSONDecoder` and the `Encodable` path (``JobJSONWriter/json(_:)``) are the reference.
final class TransferRequestCodingTests: XCTestCase {
    private func decodeBothWays(_ text: String, file: StaticString = #filePath, line: UInt = #line) {
        let reference = Result { try JSONDecoder().decode(TransferRequest.self, from: Data(text.utf8)) }
        let direct = Result { try JSONParser.parse(Array(text.utf8)).decode(as: TransferRequest.self) }
        switch (reference, direct) {
        case (.success(let a), .success(let b)):
            XCTAssertEqual(a, b, text, file: file, line: line)
        case (.failure, .failure(let error)):
            XCTAssertFalse(RPCRequest.describe(error).isEmpty, file: file, line: line)
        default:
            XCTFail("\(text): JSONDecoder \(reference), direct \(direct)", file: file, line: line)
        }
    }

    func testThatRequestsReadAsDecodableReadsThem() {
        let texts = [
            #"{"url":"http://h/f"}"#,
            #"{"url":"http://h/f","kind":"upload","method":"POST","source":"/s","form":["a=1","b=@/f;type=x/y"],"response":"/r","resumable":"tus"}"#,
            #"{"url":"http://h/é","destination":"/d \"q\"","createDirs":true,"replace":false,"headers":["A: b","C: \u0001"],"user":"u:p","sha256":"ab","priority":-3,"limitRate":"2M","retries":0,"cacert":"/c","pinPubkey":"sha256//x","pinCert":"/p","insecure":true,"onEnd":"echo hi","connections":8,"directory":null}"#,
            #"{"url":"http://h/f","limitRate":500000}"#, #"{"url":"http://h/f","limitRate":-5}"#,
            #"{"url":"http://h/f","limitRate":1.5}"#, #"{"url":"http://h/f","limitRate":true}"#,
            #"{"url":"http://h/f","unknown":[1,2,{"x":null}]}"#,
            #"{"kind":"download"}"#, #"{"url":7}"#, #"{"url":null}"#, #"{"url":"u","headers":"A: b"}"#,
            #"{"url":"u","headers":["A",1]}"#, #"{"url":"u","priority":1.5}"#, #"{"url":"u","priority":"1"}"#,
            #"{"url":"u","priority":9223372036854775807}"#, #"{"url":"u","createDirs":1}"#, #"{"url":"u","form":null}"#,
            "[]", "\"u\"",
        ]
        for text in texts { decodeBothWays(text) }
    }

    func testThatAMissingURLIsNamedAsDecodableNamesIt() throws {
        let value = try JSONParser.parse(Array(#"{"kind":"download"}"#.utf8))
        XCTAssertThrowsError(try value.decode(as: TransferRequest.self)) { error in
            XCTAssertTrue(RPCRequest.describe(error).contains("url"), RPCRequest.describe(error))
        }
        let wrong = try JSONParser.parse(Array(#"{"url":"u","headers":["A",1]}"#.utf8))
        XCTAssertThrowsError(try wrong.decode(as: TransferRequest.self)) { error in
            guard case DecodingError.typeMismatch(_, let context) = error else { return XCTFail("\(error)") }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["headers", "Index 1"])
        }
    }

    /// Requests with each member set or not, in a fixed pseudo-random pattern, with strings that
    /// need escapes.
    private func requests() -> [TransferRequest] {
        let texts = ["", "a", "/tmp/x y", "\"q\"\\", "é€😀", "\u{1}\n\t", "http://h/f?a=1&b=%20"]
        var state: UInt64 = 0x9E37_79B9_7F4A_7C15
        func next() -> UInt64 {
            state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
            return state >> 33
        }
        func text() -> String? { next() % 3 == 0 ? nil : texts[Int(next() % UInt64(texts.count))] }
        func flag() -> Bool? { next() % 3 == 0 ? nil : next() % 2 == 0 }
        func number() -> Int? { next() % 3 == 0 ? nil : Int(next() % 2000) - 1000 }
        func list() -> [String]? { next() % 3 == 0 ? nil : (0..<Int(next() % 3)).compactMap { _ in text() } }
        return (0..<300).map { _ in
            var r = TransferRequest(url: text() ?? "u")
            r.kind = text()
            r.method = text()
            r.destination = text()
            r.directory = text()
            r.createDirs = flag()
            r.replace = flag()
            r.headers = list()
            r.user = text()
            r.sha256 = text()
            r.priority = number()
            r.limitRate = text()
            r.retries = number()
            r.source = text()
            r.form = list()
            r.response = text()
            r.cacert = text()
            r.pinPubkey = text()
            r.pinCert = text()
            r.insecure = flag()
            r.resumable = text()
            r.onEnd = text()
            r.connections = number()
            return r
        }
    }

    func testThatTheMemberNamesAreEveryMemberARequestEncodes() throws {
        var r = TransferRequest(url: "u")
        (r.kind, r.method, r.destination, r.directory, r.createDirs, r.replace) = ("k", "m", "d", "d", true, true)
        (r.headers, r.user, r.sha256, r.priority, r.limitRate, r.retries) = (["h"], "u", "s", 1, "1", 1)
        (r.source, r.form, r.response, r.cacert, r.pinPubkey, r.pinCert) = ("s", ["f"], "r", "c", "p", "p")
        (r.insecure, r.resumable, r.onEnd, r.connections) = (true, "r", "o", 1)
        let encoded = try JSONParser.parse(try JobJSONWriter.json(r))
        guard case .object(let members) = encoded else { return XCTFail("\(encoded)") }
        XCTAssertEqual(Set(members.keys), TransferRequest.memberNames)
        XCTAssertNil(TransferRequest.unknownMember(of: encoded))
        XCTAssertEqual(
            TransferRequest.unknownMember(of: .object(["url": .string("u"), "sha265": .string("x")])), "sha265")
    }

    func testThatTheWriterWritesWhatTheEncoderWrites() throws {
        for request in requests() {
            var writer = JobJSONWriter()
            writer.write(request)
            XCTAssertEqual(
                String(decoding: writer.bytes, as: UTF8.self),
                String(decoding: try JobJSONWriter.json(request), as: UTF8.self))
            XCTAssertEqual(try JSONParser.parse(writer.bytes).decode(as: TransferRequest.self), request)
        }
    }
}
