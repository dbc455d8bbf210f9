import TransferBase
import XCTest

@testable import aftransfer

/// A control command's answer read an element at a time (``ResultElementScanner``): each object
/// of each top-level array comes out whole, with its member's name, whatever the chunking.
final class ResultElementScannerTests: XCTestCase {
    private func scan(_ text: String, chunk: Int = 7) throws -> (elements: [(String, JSONValue)], complete: Bool) {
        var out: [(String, JSONValue)] = []
        var s = ResultElementScanner { member, element in out.append((member, try JSONParser.parse(element))) }
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            let end = min(bytes.count, i + chunk)
            try bytes[i..<end].withUnsafeBytes { try s.feed($0) }
            i = end
        }
        return (out, s.isComplete)
    }

    func testThatEveryElementComesOutWholeWithItsMemberWhateverTheChunking() throws {
        let text =
            #"{"jobs":[{"id":1,"state":"paused","history":[{"attempt":1}],"url":"http://x/\"}]{"},"#
            + #"{"id":2,"state":"paused"}],"refused":[{"id":9,"message":"cannot pause job 9: it is completed","state":"completed"}]}"#
        for chunk in [1, 3, 64, 10_000] {
            let (elements, complete) = try scan(text, chunk: chunk)
            XCTAssertTrue(complete, "chunk \(chunk)")
            XCTAssertEqual(elements.map(\.0), ["jobs", "jobs", "refused"], "chunk \(chunk)")
            XCTAssertEqual(elements.map { $0.1["id"] }, [.int(1), .int(2), .int(9)], "chunk \(chunk)")
            XCTAssertEqual(elements[0].1["url"], .string(#"http://x/"}]{"#), "chunk \(chunk)")
        }
    }

    func testThatEmptyArraysGiveNothingAndAnUnfinishedAnswerIsNotComplete() throws {
        let empty = try scan(#"{"jobs":[],"refused":[]}"#)
        XCTAssertTrue(empty.complete)
        XCTAssertTrue(empty.elements.isEmpty)
        XCTAssertFalse(try scan(#"{"jobs":[{"id":1,"state":"paused"}"#).complete)
    }
}
