import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

/// A ``JobService`` with `count` made-up jobs (ids 1...count), for the RPC layer alone.
private final class FakeJobService: JobService {
    let count: Int64
    var pagesRead = 0
    init(count: Int64) { self.count = count }

    func snapshot(_ id: Int64) -> JobSnapshot {
        JobSnapshot(
            id: id, kind: .download, url: "https://example.com/files/\(id).bin", method: "GET", state: .completed,
            destination: "/home/user/Downloads/\(id).bin", bytes: 1_048_576, total: 1_048_576, fraction: 1, rate: 0,
            eta: 0, attempts: 1, httpStatus: 200, error: nil, waitReason: nil, nextRetryAt: nil, insecure: false,
            sha256: String(repeating: "ab", count: 32), createdAt: "2026-11-21T20:00:00Z",
            updatedAt: "2026-11-21T20:00:01.250Z", completedAt: "2026-11-21T20:00:01.250Z",
            history: [
                AttemptRecord(
                    attempt: 1, startedAt: "2026-11-21T20:00:00Z", endedAt: "2026-11-21T20:00:01.250Z", httpStatus: 200,
                    bytes: 1_048_576, nameLookup: 0.001, connect: 0.002, tls: 0, firstByte: 0.01, total: 1.25)
            ])
    }

    func add(_ request: TransferRequest) throws -> JobSnapshot { throw TransferError(.invalidRequest, "read-only") }
    func prepare(_ request: TransferRequest) throws -> JobRecord { throw TransferError(.invalidRequest, "read-only") }
    func addMany(_ requests: [TransferRequest]) throws -> AddedJobs { AddedJobs(records: [], stamp: "") }
    func stage(_ records: [JobRecord], batch: String) throws {}
    func discardStaged(batch: String) {}
    func addStaged(_ batch: BatchAssembler.Complete) throws -> ClosedRange<Int64> { 1...1 }
    /// The calls made, in order (`control` by its action, `job` as "get").
    nonisolated(unsafe) static var calls: [String] = []
    func job(_ id: Int64) -> JobSnapshot? {
        Self.calls.append("get")
        return (1...count).contains(id) ? snapshot(id) : nil
    }
    func jobs(state: TransferState?, after: Int64?, limit: Int) -> [JobSnapshot] {
        pagesRead += 1
        let first = (after ?? 0) + 1
        guard first <= count, limit > 0 else { return [] }
        return (first...min(count, first + Int64(limit) - 1)).map(snapshot)
    }
    /// `pause` waits, as for a job whose file is being put in place, until a `resume` comes.
    private var waitingPauses: [(Result<ControlResult, Error>) -> Void] = []
    func control(
        _ action: ControlAction, ids: [Int64], deleteFiles: Bool,
        answer: @escaping (Result<ControlResult, Error>) -> Void
    ) {
        Self.calls.append(action.rawValue)
        switch action {
        case .pause:
            waitingPauses.append(answer)
        case .resume:
            for waiting in waitingPauses { waiting(.success(ControlResult(jobs: [snapshot(1)], refused: []))) }
            waitingPauses = []
            answer(.success(ControlResult(jobs: [], refused: [])))
        default:
            answer(.success(ControlResult(jobs: [], refused: [])))
        }
    }
    func curlCommand(_ id: Int64) -> String? { nil }
    func setURL(_ id: Int64, url: String) throws -> JobSnapshot? { nil }
    func counts() -> [TransferState: Int] { [.completed: Int(count)] }
    var activeTransfers: Int { 0 }
    var totalRate: Double { 0 }
    var isReachable: Bool { true }
    func segments(of id: Int64) -> [SegmentProgress]? { nil }
    func currentLimits() -> LimitsInForce { LimitsInForce(download: nil, upload: nil, schedule: nil) }
    func setLimits(download: String?, upload: String?, schedule: String?) throws -> LimitsInForce { currentLimits() }
    func commit() throws {}
}

/// The RPC server on a real socket and loop (on its own thread), with a made-up engine.
final class RPCServerTests: XCTestCase {
    private var home = ""

    override func setUpWithError() throws { home = try makeTemporaryHome("aft-rpc") }
    override func tearDownWithError() throws { try? FileManager.default.removeItem(atPath: home) }

    /// Starts a server with `jobs` made-up jobs; returns its socket path and a semaphore signalled
    /// when its loop has ended (after `daemon.shutdown`).
    private func startServer(jobs: Int64) throws -> (String, DispatchSemaphore) {
        let path = home + "/s.sock"
        let home = self.home
        let ready = DispatchSemaphore(value: 0)
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            guard let loop = try? EventLoop() else {
                ready.signal()
                return
            }
            var server: RPCServer?
            var stopTimer: LoopTimer?
            let context = RPCContext(
                service: FakeJobService(count: jobs),
                info: RPCContext.DaemonInfo(home: home, socket: path, maxActive: 4, startedAt: 1_795_000_000),
                requestShutdown: {
                    let t = LoopTimer(loop: loop)
                    stopTimer = t
                    t.start(after: 10) {
                        server?.close()
                        stopTimer?.close()
                        loop.stop()
                    }
                })
            server = try? RPCServer(loop: loop, path: path, router: RPCRouter(context: context))
            ready.signal()
            if server != nil { loop.run() }
            finished.signal()
        }
        thread.start()
        XCTAssertEqual(ready.wait(timeout: .now() + 10), .success)
        return (path, finished)
    }

    private func shutdown(_ path: String, _ finished: DispatchSemaphore) throws {
        let client = try RPCClient.connect(path: path, timeout: 10)
        _ = try client.call(method: .daemonShutdown)
        client.close()
        XCTAssertEqual(finished.wait(timeout: .now() + 10), .success)
    }

    private static func memory(_ field: String) -> String {
        let status = (try? String(contentsOfFile: "/proc/self/status", encoding: .utf8)) ?? ""
        return status.split(separator: "\n").first { $0.hasPrefix(field) }.map { String($0) } ?? "?"
    }

    func testThatAListOf100000JobsIsOneStreamedLineWhileOtherRequestsAreServed() throws {
        let (path, finished) = try startServer(jobs: 100_000)
        guard let socket = RawSocket(path: path) else { return XCTFail("cannot connect") }
        let started = Date()
        socket.send(#"{"jsonrpc":"2.0","id":7,"method":"transfer.list"}"#)
        var line = socket.readLine(limit: 64 * 1024)
        XCTAssertTrue(line.starts(with: Array(#"{"id":7,"jsonrpc":"2.0","result":[{"attempts":1,"#.utf8)))
        // The list is not done, and another client is answered meanwhile.
        let other = try RPCClient.connect(path: path, timeout: 10)
        XCTAssertEqual(
            try other.call(method: .daemonStatus, params: [String: String](), as: DaemonStatus.self).jobs["completed"],
            100_000)
        other.close()
        line += socket.readLine()
        let seconds = Date().timeIntervalSince(started)
        print(
            String(
                format: "transfer.list of 100000 jobs: %d bytes in %.3f s; %@", line.count, seconds,
                Self.memory("VmHWM")))
        XCTAssertEqual(line.last, 0x0A)
        let response = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(line)) as? [String: Any])
        let jobs = try XCTUnwrap(response["result"] as? [[String: Any]])
        XCTAssertEqual(jobs.count, 100_000)
        XCTAssertEqual(jobs.first?["id"] as? Int, 1)
        XCTAssertEqual(jobs.last?["id"] as? Int, 100_000)
        try shutdown(path, finished)
    }

    func testThatListTakesALimitAndAnswersOnTheSameConnectionInOrder() throws {
        let (path, finished) = try startServer(jobs: 1234)
        guard let socket = RawSocket(path: path) else { return XCTFail("cannot connect") }
        socket.send(#"{"jsonrpc":"2.0","id":1,"method":"transfer.list","params":{"limit":3}}"#)
        socket.send(#"{"jsonrpc":"2.0","id":2,"method":"transfer.list","params":{"limit":501}}"#)
        socket.send(#"{"jsonrpc":"2.0","id":3,"method":"transfer.get","params":{"id":2}}"#)
        socket.send(#"{"jsonrpc":"2.0","id":4,"method":"transfer.list","params":{"limit":-1}}"#)
        let lines = try Self.responses(4, from: socket)
        XCTAssertEqual(lines.map { $0["id"] as? Int }, [1, 2, 3, 4])
        XCTAssertEqual((lines[0]["result"] as? [[String: Any]])?.compactMap { $0["id"] as? Int }, [1, 2, 3])
        XCTAssertEqual((lines[1]["result"] as? [[String: Any]])?.count, 501)
        XCTAssertEqual((lines[2]["result"] as? [String: Any])?["id"] as? Int, 2)
        XCTAssertEqual((lines[3]["error"] as? [String: Any])?["code"] as? Int, RPCErrorCode.invalidParams)
        try shutdown(path, finished)
    }

    /// Reads `count` response lines from `socket`, each parsed as a JSON object.
    private static func responses(_ count: Int, from socket: RawSocket) throws -> [[String: Any]] {
        var lines: [[String: Any]] = []
        var pending: [UInt8] = []
        while lines.count < count {
            pending += socket.readLine()
            while let nl = pending.firstIndex(of: 0x0A) {
                let one = Array(pending[..<nl])
                pending.removeSubrange(...nl)
                lines.append(try XCTUnwrap(JSONSerialization.jsonObject(with: Data(one)) as? [String: Any]))
            }
        }
        return lines
    }

    func testThatAnAnswerGivenLaterHoldsTheConnectionsLaterRequestsBehindIt() throws {
        FakeJobService.calls = []
        let (path, finished) = try startServer(jobs: 3)
        guard let socket = RawSocket(path: path) else { return XCTFail("cannot connect") }
        socket.send(#"{"jsonrpc":"2.0","id":1,"method":"transfer.pause","params":{"ids":[1]}}"#)
        socket.send(#"{"jsonrpc":"2.0","id":2,"method":"transfer.get","params":{"id":2}}"#)
        var pollFD = pollfd(fd: socket.fd, events: Int16(POLLIN), revents: 0)
        XCTAssertEqual(poll(&pollFD, 1, 300), 0, "nothing is answered before the pause is")
        // Another client is served meanwhile, and its resume gives the pause its answer.
        let other = try RPCClient.connect(path: path, timeout: 10)
        _ = try other.call(method: .transferResume, params: .object(["ids": .array([.int(3)])]))
        other.close()
        let lines = try Self.responses(2, from: socket)
        XCTAssertEqual(lines.map { $0["id"] as? Int }, [1, 2])
        let paused = (lines[0]["result"] as? [String: Any])?["jobs"] as? [[String: Any]]
        XCTAssertEqual(paused?.first?["id"] as? Int, 1)
        XCTAssertEqual((lines[1]["result"] as? [String: Any])?["id"] as? Int, 2)
        // The get was decided after the pause it followed, not answered from before it.
        XCTAssertEqual(FakeJobService.calls, ["pause", "resume", "get"])
        try shutdown(path, finished)
    }
}
