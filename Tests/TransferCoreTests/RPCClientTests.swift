import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

final class RPCClientTests: XCTestCase {
    // MARK: - Line framing

    /// The next line of `buffer` as text (read in place, as the client reads it).
    private func next(_ buffer: inout LineBuffer) throws -> String? {
        try buffer.withNextLine { String(decoding: $0, as: UTF8.self) }
    }

    func testThatALineSplitOverSeveralReadsIsReturnedWhole() throws {
        var buffer = LineBuffer(maximumLineLength: 1024)
        buffer.append(Array(#"{"jsonrpc":"2.0","#.utf8))
        XCTAssertNil(try next(&buffer))
        buffer.append(Array(#""id":1}"#.utf8))
        XCTAssertNil(try next(&buffer))
        buffer.append(Array("\n".utf8))
        XCTAssertEqual(try next(&buffer), #"{"jsonrpc":"2.0","id":1}"#)
        XCTAssertNil(try next(&buffer))
    }

    func testThatSeveralLinesInOneReadAreReturnedInOrderWithoutEmptyLinesOrCarriageReturns() throws {
        var buffer = LineBuffer(maximumLineLength: 1024)
        buffer.append(Array("one\r\n\ntwo\nthr".utf8))
        XCTAssertEqual(try next(&buffer), "one")
        XCTAssertEqual(try next(&buffer), "two")
        XCTAssertNil(try next(&buffer))
        buffer.append(Array("ee\n".utf8))
        XCTAssertEqual(try next(&buffer), "three")
    }

    func testThatALineLongerThanTheLimitIsRefused() {
        var buffer = LineBuffer(maximumLineLength: 8)
        buffer.append(Array("0123456789".utf8))
        XCTAssertThrowsError(try next(&buffer))
    }

    // MARK: - Connecting

    func testThatConnectingWhereNoDaemonListensIsUnreachable() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("rpcclient-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let path = directory.appendingPathComponent("none.sock").path
        XCTAssertThrowsError(try RPCClient.connect(path: path)) { error in
            guard case ClientError.unreachable(let reported, _)? = error as? ClientError else {
                return XCTFail("expected unreachable, got \(error)")
            }
            XCTAssertEqual(reported, path)
        }
    }

    func testThatASocketPathTooLongForSockaddrIsUnreachableNotACrash() {
        let path = "/tmp/" + String(repeating: "x", count: 200) + ".sock"
        XCTAssertThrowsError(try RPCClient.connect(path: path)) { error in
            guard case ClientError.unreachable? = error as? ClientError else {
                return XCTFail("expected unreachable, got \(error)")
            }
        }
    }

    // MARK: - Streaming a result

    func testThatAStreamedResultReachesTheSinkWithoutTheEnvelopeWhateverTheChunks() throws {
        let result = #"[{"id":1,"url":"http://x/a"},{"id":2,"url":"http://x/}"}]"#
        let line = #"{"id":1,"jsonrpc":"2.0","result":"# + result + "}\n"
        // Cut everywhere that matters: inside the prefix, just before the closing brace, between it and
        // the newline.
        let bytes = Array(line.utf8)
        let chunks = [
            bytes[0..<5], bytes[5..<40], bytes[40..<(bytes.count - 2)], bytes[(bytes.count - 2)..<(bytes.count - 1)],
            bytes[(bytes.count - 1)...],
        ].map { Array($0) }
        try FakeServer.run(chunks: chunks) { client in
            var received = Data()
            let outcome = try client.callStreamingResult(method: RPCMethod.transferList.rawValue) {
                received.append(contentsOf: $0)
            }
            XCTAssertEqual(outcome, .streamed(byteCount: result.utf8.count))
            XCTAssertEqual(String(decoding: received, as: UTF8.self), result)
        }
    }

    func testThatAnErrorResponseIsThrownAsAnRPCErrorAndNothingReachesTheSink() throws {
        let line = #"{"error":{"code":-32602,"message":"bad state"},"id":1,"jsonrpc":"2.0"}"# + "\n"
        try FakeServer.run(chunks: [Array(line.utf8)]) { client in
            var received = Data()
            XCTAssertThrowsError(
                try client.callStreamingResult(method: RPCMethod.transferList.rawValue) {
                    received.append(contentsOf: $0)
                }
            ) {
                XCTAssertEqual(($0 as? RPCError)?.code, RPCErrorCode.invalidParams)
            }
            XCTAssertTrue(received.isEmpty)
        }
    }

    func testThatAResponseInAnotherKeyOrderIsDecodedInsteadOfStreamed() throws {
        let line = #"{"jsonrpc":"2.0","id":1,"result":[1,2]}"# + "\n"
        try FakeServer.run(chunks: [Array(line.utf8)]) { client in
            var received = Data()
            let outcome = try client.callStreamingResult(method: RPCMethod.transferList.rawValue) {
                received.append(contentsOf: $0)
            }
            XCTAssertEqual(outcome, .decoded(.array([.int(1), .int(2)])))
            XCTAssertTrue(received.isEmpty)
        }
    }

    func testThatTheConnectionStaysUsableAfterAStreamedResult() throws {
        // Both answers in one write: the second one waits in the buffer for the next call.
        let lines =
            #"{"id":1,"jsonrpc":"2.0","result":[]}"# + "\n" + #"{"id":2,"jsonrpc":"2.0","result":{"ok":true}}"# + "\n"
        try FakeServer.run(chunks: [Array(lines.utf8)]) { client in
            var received = Data()
            XCTAssertEqual(
                try client.callStreamingResult(method: RPCMethod.transferList.rawValue) {
                    received.append(contentsOf: $0)
                },
                .streamed(byteCount: 2))
            XCTAssertEqual(String(decoding: received, as: UTF8.self), "[]")
            XCTAssertEqual(try client.call(method: RPCMethod.daemonStatus), .object(["ok": .bool(true)]))
        }
    }

    // MARK: - A list's jobs read straight into job objects

    private static let job =
        #"{"attempts":0,"bytes":0,"completedAt":null,"connections":0,"createdAt":"2026-11-28T03:33:42Z","#
        + #""destination":"/tmp/o/a.bin","error":null,"eta":null,"fraction":null,"history":[],"hook":null,"#
        + #""httpStatus":null,"id":5,"insecure":false,"kind":"download","method":"GET","nextRetryAt":null,"#
        + #""rate":0,"sha256":null,"state":"queued","total":null,"updatedAt":"2026-11-28T03:33:42Z","#
        + #""url":"http://x/a.bin","waitReason":null}"#

    func testThatAJobsAnswerIsReadStraightIntoJobsAfterAnEventAndAnotherAnswer() throws {
        let lines = [
            #"{"jsonrpc":"2.0","method":"transfer.state","params":"# + Self.job + "}",
            #"{"id":7,"jsonrpc":"2.0","result":{"jobs":[]}}"#,
            #"{"id":1,"jsonrpc":"2.0","result":{"jobs":["# + Self.job + ",null]}}",
        ]
        try FakeServer.run(chunks: lines.map { Array(($0 + "\n").utf8) }) { client in
            let id = try client.post(method: RPCMethod.transferAddMany.rawValue, params: Array("{}".utf8))
            guard case .jobs(let jobs) = try client.jobsResponse(to: id, method: "m") else {
                return XCTFail("not read straight into jobs")
            }
            XCTAssertEqual(jobs.map { $0?.id }, [5, nil])
            XCTAssertEqual(jobs.first??.destination, "/tmp/o/a.bin")
            var kept: [Int64] = []
            try client.streamEvents(tickInterval: 5) { event in
                if case .state(let job) = event { kept.append(job.id) }
                return kept.isEmpty
            }
            XCTAssertEqual(kept, [5], "the event read while waiting is kept for the follower")
        }
    }

    func testThatAJobsAnswerTheReaderLeavesIsGivenAsItsResult() throws {
        let escaped = Self.job.replacingOccurrences(of: "a.bin\"", with: "a\\u00e9.bin\"")
        let line = #"{"id":1,"jsonrpc":"2.0","result":{"jobs":["# + escaped + "]}}\n"
        try FakeServer.run(chunks: [Array(line.utf8)]) { client in
            let id = try client.post(method: RPCMethod.transferAddMany.rawValue, params: Array("{}".utf8))
            guard case .result(let result) = try client.jobsResponse(to: id, method: "m") else {
                return XCTFail("read by the fast path")
            }
            guard case .array(let jobs)? = result["jobs"], case .string(let url)? = jobs.first?["url"] else {
                return XCTFail("\(result)")
            }
            XCTAssertEqual(url, "http://x/a\u{e9}.bin")
        }
    }

    func testThatAJobsAnswerThatIsAnErrorIsThrown() throws {
        let line = #"{"error":{"code":-32602,"message":"request 3: bad"},"id":1,"jsonrpc":"2.0"}"# + "\n"
        try FakeServer.run(chunks: [Array(line.utf8)]) { client in
            let id = try client.post(method: RPCMethod.transferAddMany.rawValue, params: Array("{}".utf8))
            XCTAssertThrowsError(try client.jobsResponse(to: id, method: "m")) {
                XCTAssertEqual(($0 as? RPCError)?.message, "request 3: bad")
            }
        }
    }

    func testThatAResultLineThatDoesNotEndWithABraceIsAProtocolViolation() throws {
        let line = #"{"id":1,"jsonrpc":"2.0","result":[1,2]"# + "\n"
        try FakeServer.run(chunks: [Array(line.utf8)]) { client in
            XCTAssertThrowsError(try client.callStreamingResult(method: RPCMethod.transferList.rawValue) { _ in }) {
                guard case ClientError.protocolViolation? = $0 as? ClientError else { return XCTFail("got \($0)") }
            }
        }
    }
}

/// A one-connection Unix-socket server for the client's tests: it reads one request line, then
/// writes `chunks` one at a time with a pause between them (so the client sees several reads).
private enum FakeServer {
    static func run(chunks: [[UInt8]], _ body: (RPCClient) throws -> Void) throws {
        let directory = "/tmp/rpcfake-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let path = directory + "/s.sock"
        let listener = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        XCTAssertGreaterThanOrEqual(listener, 0)
        defer { _ = close(listener) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: Array(path.utf8))
            raw[path.utf8.count] = 0
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(listen(listener, 1), 0)

        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            defer { done.signal() }
            let fd = accept(listener, nil, nil)
            guard fd >= 0 else { return }
            defer { _ = close(fd) }
            var byte: UInt8 = 0
            while read(fd, &byte, 1) == 1, byte != UInt8(ascii: "\n") {}
            for chunk in chunks {
                _ = chunk.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                usleep(20_000)
            }
            // Keep the connection open until the client is done reading.
            while read(fd, &byte, 1) > 0 {}
        }
        thread.start()
        let client = try RPCClient.connect(path: path, timeout: 5)
        defer {
            client.close()
            done.wait()
        }
        try body(client)
    }
}
