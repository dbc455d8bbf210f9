import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

final class JobJSONWriterTests: XCTestCase {
    /// The encoder the daemon used for job objects before the writer.
    private let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }()

    /// A deterministic random source (splitmix64), so that a failure can be reproduced.
    private final class Random {
        private var state: UInt64
        init(seed: UInt64) { state = seed }
        func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
        func int(_ range: ClosedRange<Int>) -> Int { range.lowerBound + Int(next() % UInt64(range.count)) }
        func bool() -> Bool { next() & 1 == 1 }
        func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
        func pick<T>(_ values: [T]) -> T { values[int(0...(values.count - 1))] }
        func maybe<T>(_ value: () -> T) -> T? { bool() ? value() : nil }
    }

    private static let pieces: [String] = [
        "", "a", "plain text", "/path/with/slashes", "quote\"inside", "back\\slash", "tab\there", "new\nline",
        "cr\rlf\n", "\u{0}nul", "\u{1}\u{1F}\u{7F}", "\u{8}\u{C}", "é", "日本語", "😀🚀", "\u{2028}\u{2029}", "ÿ",
        "https://user@example.com/a?b=c&d=%20", "***", "a\u{301}",
    ]

    private func string(_ r: Random) -> String {
        (0..<r.int(0...4)).map { _ in r.pick(Self.pieces) }.joined()
    }

    private func double(_ r: Random) -> Double {
        switch r.int(0...9) {
        case 0: return 0
        case 1: return -0.0
        case 2: return Double(r.int(-1_000_000...1_000_000_000))
        case 3: return r.unit()
        case 4: return r.unit() * 1e-6
        case 5: return 1e15 + r.unit() * 1e22
        case 6:
            return r.pick([
                0.5, 0.1, 0.001, 123456.7, 1e-5, 1e16, 1.5e300, Double.leastNonzeroMagnitude,
                Double.greatestFiniteMagnitude,
            ])
        case 7: return Double(Int64(bitPattern: r.next()))
        default: return -1e6 + r.unit() * 1e9
        }
    }

    private func int64(_ r: Random) -> Int64 {
        switch r.int(0...4) {
        case 0: return 0
        case 1: return Int64.max
        case 2: return Int64.min
        case 3: return Int64(r.int(0...9))
        default: return Int64(bitPattern: r.next())
        }
    }

    private func error(_ r: Random) -> TransferError? {
        r.maybe { TransferError(r.pick(TransferErrorCode.allCases), string(r), retryable: r.bool()) }
    }

    private func snapshot(_ r: Random) -> JobSnapshot {
        let kind: JobKind = r.bool() ? .download : .upload
        let history = (0..<r.int(0...3)).map { n in
            AttemptRecord(
                attempt: n + 1, startedAt: string(r), endedAt: r.maybe { string(r) },
                httpStatus: r.maybe { r.int(100...599) }, bytes: int64(r),
                nameLookup: r.maybe { double(r) }, connect: r.maybe { double(r) }, tls: r.maybe { double(r) },
                firstByte: r.maybe { double(r) }, total: r.maybe { double(r) }, error: error(r))
        }
        var headers: [String: String] = [:]
        for _ in 0..<r.int(0...4) {
            headers[r.pick(["Content-Type", "etag", "X-A", "x-b", "Location", "_z", "a10", "a9"])] = string(r)
        }
        var job = JobSnapshot(
            id: int64(r), kind: kind, url: string(r), method: r.pick(["GET", "PUT", "POST"]),
            state: r.pick(TransferState.allCases), destination: r.maybe { string(r) }, bytes: int64(r),
            total: r.maybe { int64(r) }, fraction: r.maybe { double(r) }, rate: double(r), eta: r.maybe { double(r) },
            attempts: r.int(0...1000), httpStatus: r.maybe { r.int(100...599) }, error: error(r),
            waitReason: r.maybe { r.pick([WaitReason.backoff, .offline, .disk]) },
            nextRetryAt: r.maybe { "2026-11-21T20:00:00.250Z" }, insecure: r.bool(),
            sha256: r.maybe { String(repeating: "ab", count: 32) }, createdAt: "2026-11-21T20:00:00Z",
            updatedAt: string(r), completedAt: r.maybe { "2026-11-21T20:00:01Z" }, history: history,
            response: r.maybe { ResponseInfo(status: r.int(100...599), headers: headers, body: string(r)) },
            uploadUrl: r.maybe { string(r) }, resumable: r.maybe { r.pick([ResumableProtocol.ietf, .tus]) },
            hook: r.maybe { HookResult(exitStatus: r.int(0...255), output: string(r)) })
        job.connections = r.int(0...16)
        return job
    }

    private func written(_ job: JobSnapshot) -> Data {
        var writer = JobJSONWriter()
        writer.write(job)
        return Data(writer.bytes)
    }

    func testThatTheWriterWritesWhatJSONEncoderWritesForManyVariedSnapshots() throws {
        let g = Random(seed: 42)
        for n in 0..<5000 {
            let job = snapshot(g)
            let expected = try encoder.encode(job)
            let actual = written(job)
            let parsedExpected = try JSONSerialization.jsonObject(with: expected) as? NSDictionary
            let parsedActual = try JSONSerialization.jsonObject(with: actual) as? NSDictionary
            XCTAssertNotNil(parsedActual, "snapshot \(n) does not parse")
            XCTAssertEqual(parsedActual, parsedExpected, "snapshot \(n): \(String(decoding: actual, as: UTF8.self))")
            XCTAssertEqual(
                String(decoding: actual, as: UTF8.self), String(decoding: expected, as: UTF8.self),
                "snapshot \(n), bytes")
            if parsedActual != parsedExpected { return }
        }
    }

    func testThatAnUploadWithoutAResponseHasANullResponseAndADownloadNone() throws {
        let g = Random(seed: 7)
        var job = snapshot(g)
        job.kind = .upload
        job.response = nil
        let upload = try XCTUnwrap(JSONSerialization.jsonObject(with: written(job)) as? [String: Any])
        XCTAssertTrue(upload["response"] is NSNull)
        job.uploadUrl = nil
        job.resumable = nil
        let plain = try XCTUnwrap(JSONSerialization.jsonObject(with: written(job)) as? [String: Any])
        XCTAssertTrue(plain["uploadUrl"] is NSNull)
        XCTAssertTrue(plain["resumable"] is NSNull)
        job.kind = .download
        let download = try XCTUnwrap(JSONSerialization.jsonObject(with: written(job)) as? [String: Any])
        XCTAssertNil(download["response"])
        XCTAssertNil(download["uploadUrl"])
        XCTAssertNil(download["resumable"])
    }

    func testThatNumbersJSONCannotHoldAreWrittenAsNull() throws {
        var writer = JobJSONWriter()
        writer.double(.nan)
        writer.key(",")
        writer.double(.infinity)
        writer.key(",")
        writer.double(-0.0)
        writer.key(",")
        writer.int(Int64.min)
        XCTAssertEqual(String(decoding: writer.bytes, as: UTF8.self), "null,null,-0,-9223372036854775808")
    }

    /// Not a timed assertion: prints both costs for the record (`swift test --filter JobJSONWriter`).
    func testThatTheWriterIsMeasuredAgainstJSONEncoder() throws {
        let g = Random(seed: 1)
        var jobs: [JobSnapshot] = []
        for n in 0..<100_000 {
            var job = snapshot(g)
            // Typical jobs: one or two attempts, plain strings.
            job.id = Int64(n + 1)
            job.url = "https://example.com/files/\(n).bin"
            job.destination = "/home/user/Downloads/\(n).bin"
            job.history = Array(job.history.prefix(2))
            jobs.append(job)
        }
        let t0 = Date()
        var writer = JobJSONWriter(capacity: 64 << 20)
        for job in jobs {
            writer.write(job)
            writer.key(",")
        }
        let writerSeconds = Date().timeIntervalSince(t0)
        let t1 = Date()
        var encoded = 0
        for job in jobs { encoded += try encoder.encode(job).count }
        let encoderSeconds = Date().timeIntervalSince(t1)
        print(
            String(
                format:
                    "JobJSONWriter: 100000 jobs, %d bytes in %.3f s (%.2f µs/job); JSONEncoder: %d bytes in %.3f s (%.2f µs/job)",
                writer.bytes.count, writerSeconds, writerSeconds * 10, encoded, encoderSeconds, encoderSeconds * 10))
    }
}
