import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

final class JobSnapshotTests: XCTestCase {
    private func sample(kind: JobKind = .download) -> JobSnapshot {
        JobSnapshot(
            id: 12, kind: kind, url: "https://example.com/x", method: "GET", state: .running, destination: nil,
            bytes: 5, total: nil, fraction: nil, rate: 0, eta: nil, attempts: 1, httpStatus: nil, error: nil,
            waitReason: nil, nextRetryAt: nil, insecure: false, sha256: nil, createdAt: "2026-11-21T20:00:00Z",
            updatedAt: "2026-11-21T20:00:00Z", completedAt: nil, history: [])
    }

    func testThatOnlyAnOpenHistoryEntryTakesTheRunningAttemptsStatusAndBytes() {
        var closed = AttemptRecord(attempt: 1, startedAt: "a")
        closed.endedAt = "b"
        closed.httpStatus = 503
        let open = AttemptRecord(attempt: 2, startedAt: "c")
        let live = LiveProgress(bytes: 42, total: nil, rate: 1, httpStatus: 206)
        let shown = Engine.withOpenEntry([closed, open], at: 1, live, status: 206)
        XCTAssertEqual(shown[0], closed)
        XCTAssertEqual(shown[1].httpStatus, 206)
        XCTAssertEqual(shown[1].bytes, 42)
        XCTAssertEqual(
            Engine.withOpenEntry([closed], at: 0, live, status: 206), [closed], "an ended entry keeps its figures")
        XCTAssertEqual(Engine.withOpenEntry([closed], at: 1, live, status: 206), [closed], "no entry at that index yet")
        // A request in flight with no answer yet shows none, whatever the attempt's last status.
        XCTAssertNil(Engine.withOpenEntry([closed, open], at: 1, live, status: nil)[1].httpStatus)
    }

    func testThatEveryFieldOfTheJobObjectIsPresentEvenWhenNull() throws {
        let data = try JSONEncoder().encode(sample())
        let obj = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
        let expected: Set<String> = [
            "id", "kind", "url", "method", "state", "destination", "bytes", "total", "fraction", "rate", "eta",
            "attempts", "httpStatus", "error", "waitReason", "nextRetryAt", "insecure", "sha256", "createdAt",
            "updatedAt", "completedAt", "history", "hook",
            "connections",
        ]
        XCTAssertEqual(Set(obj.keys), expected)
        XCTAssertTrue(obj["hook"] is NSNull)
        XCTAssertTrue(obj["destination"] is NSNull)
        XCTAssertTrue(obj["total"] is NSNull)
    }

    func testThatUploadsCarryAResponseField() throws {
        let data = try JSONEncoder().encode(sample(kind: .upload))
        let obj = try XCTUnwrap(JSONSerialization.jsonObject(with: data) as? [String: Any])
        XCTAssertTrue(obj.keys.contains("response"))
    }

    func testThatAnAttemptRecordEncodesItsTimelineWithNulls() throws {
        let a = AttemptRecord(attempt: 1, startedAt: "t")
        let obj = try XCTUnwrap(JSONSerialization.jsonObject(with: JSONEncoder().encode(a)) as? [String: Any])
        for key in ["endedAt", "httpStatus", "nameLookup", "connect", "tls", "firstByte", "total", "error"] {
            XCTAssertTrue(obj[key] is NSNull, key)
        }
    }

    func testThatTimestampsAreRFC3339InUTC() {
        XCTAssertEqual(Timestamp.rfc3339(0), "1970-01-01T00:00:00Z")
        XCTAssertEqual(Timestamp.rfc3339(1_795_204_800.25), "2026-11-20T20:00:00.250Z")
    }
}
