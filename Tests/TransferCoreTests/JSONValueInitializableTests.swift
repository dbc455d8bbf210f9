import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

/// The job object read member by member (``JSONValueInitializable``) must give what `Decodable`
/// gives: Foundation's `JSONDecoder` (the synthesized `init(from:)`) is the reference.
final class JSONValueInitializableTests: XCTestCase {
    private func full() -> JobSnapshot { JobSnapshot.everyMemberSet }

    private func minimal() -> JobSnapshot {
        JobSnapshot(
            id: 1, kind: .download, url: "http://x/", method: "GET", state: .queued, destination: nil, bytes: 0,
            total: nil, fraction: nil, rate: 0, eta: nil, attempts: 0, httpStatus: nil, error: nil, waitReason: nil,
            nextRetryAt: nil, insecure: false, sha256: nil, createdAt: "c", updatedAt: "u", completedAt: nil,
            history: [])
    }

    /// Decodes `text` both ways; both must succeed with equal values or both fail.
    private func assertSame(_ text: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let reference = Result { try JSONDecoder().decode(JobSnapshot.self, from: Data(text.utf8)) }
        let direct = Result {
            try JobSnapshot(jsonValue: try JSONParser.parse(Array(text.utf8)), codingPath: [])
        }
        let throughDecoder = Result { try JSONParser.parse(Array(text.utf8)).decode(as: JobSnapshot.self) }
        switch (reference, direct, throughDecoder) {
        case (.success(let a), .success(let b), .success(let c)):
            XCTAssertEqual(a, b, file: file, line: line)
            XCTAssertEqual(a, c, file: file, line: line)
        case (.failure, .failure, .failure):
            break
        default:
            XCTFail(
                "JSONDecoder \(reference), direct \(direct), JSONValueDecoder \(throughDecoder)", file: file, line: line
            )
        }
    }

    private func text(_ job: JobSnapshot) throws -> String {
        String(decoding: try JSONEncoder().encode(job), as: UTF8.self)
    }

    /// The object of `job` with `change` applied to its members, as JSON text.
    private func edited(_ job: JobSnapshot, _ change: (inout [String: Any]) -> Void) throws -> String {
        var object = try XCTUnwrap(JSONSerialization.jsonObject(with: JSONEncoder().encode(job)) as? [String: Any])
        change(&object)
        return String(decoding: try JSONSerialization.data(withJSONObject: object), as: UTF8.self)
    }

    func testThatEveryFieldReadsAsDecodableReadsIt() throws {
        try assertSame(try text(full()))
        try assertSame(try text(minimal()))
        let decoded = try JSONParser.parse(Array(try text(full()).utf8)).decode(as: JobSnapshot.self)
        XCTAssertEqual(decoded, full())
    }

    func testThatAbsentOptionalMembersAreNilAsInDecodable() throws {
        for key in [
            "destination", "total", "fraction", "eta", "httpStatus", "error", "waitReason", "hook", "connections",
        ] {
            try assertSame(try edited(full()) { $0[key] = nil })
        }
        let withoutConnections = try JSONParser.parse(Array(try edited(minimal()) { $0["connections"] = nil }.utf8))
        XCTAssertNil(try withoutConnections.decode(as: JobSnapshot.self).connections)
    }

    func testThatBadMembersFailAsInDecodable() throws {
        let cases: [(String, Any)] = [
            ("id", "1"), ("id", 1.5), ("state", "sleeping"), ("kind", NSNull()), ("bytes", true),
            ("rate", "fast"), ("attempts", 9_223_372_036_854_775_807 as Int64), ("insecure", 1), ("history", [1]),
            ("history", [["attempt": 1]]), ("error", ["code": "nope", "message": "m", "retryable": true]),
            ("error", ["code": "http_status", "message": "m"]), ("hook", ["exitStatus": "x", "output": ""]),
            ("response", ["status": 200, "headers": ["a": 1], "body": ""]), ("waitReason", 3),
            ("resumable", "ftp"), ("total", "12"), ("connections", "2"),
        ]
        for (key, value) in cases {
            try assertSame(try edited(full()) { $0[key] = value })
        }
        for key in ["id", "kind", "url", "state", "bytes", "rate", "attempts", "insecure", "createdAt", "history"] {
            try assertSame(try edited(minimal()) { $0[key] = nil })
        }
        try assertSame("[]")
        try assertSame("null")
    }

    func testThatAMismatchNamesItsPath() throws {
        let value = try JSONParser.parse(Array(try edited(full()) { $0["history"] = [["attempt": 1.5]] }.utf8))
        XCTAssertThrowsError(try value.decode(as: JobSnapshot.self)) { error in
            guard case DecodingError.typeMismatch(_, let context) = error else {
                return XCTFail("\(error)")
            }
            XCTAssertEqual(context.codingPath.map(\.stringValue), ["history", "Index 0", "attempt"])
        }
    }

    func testThatArraysOfJobsReadEachJobDirectly() throws {
        let text = "[" + (try text(full())) + "," + (try text(minimal())) + "]"
        let jobs = try JSONParser.parse(Array(text.utf8)).decode(as: [JobSnapshot].self)
        XCTAssertEqual(jobs, [full(), minimal()])
    }
}
