import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

/// `Daemon.run` booted in-process in a temporary home (pueue's habit), driven with `RPCClient`.
final class DaemonRunTests: XCTestCase {
    private var home = ""

    override func setUpWithError() throws {
        home = try makeTemporaryHome("aft-daemon")
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: home)
    }

    private func connect(_ path: String, within seconds: Double = 10) throws -> RPCClient {
        let deadline = Date().addingTimeInterval(seconds)
        while true {
            do {
                return try RPCClient.connect(path: path, timeout: 10)
            } catch {
                if Date() > deadline { throw error }
                usleep(20_000)
            }
        }
    }

    private func rpcError(_ body: () throws -> Any) -> RPCError? {
        do {
            _ = try body()
            return nil
        } catch {
            return error as? RPCError
        }
    }

    func testThatADaemonRunInProcessAnswersAndReturns0AfterDaemonShutdown() throws {
        var settings = DaemonConfiguration(paths: Paths(home: home, socket: home + "/aftransferd.sock"))
        settings.watchNetwork = false
        let config = settings
        let status = Locked<Int32?>(nil)
        let finished = DispatchSemaphore(value: 0)
        let thread = Thread {
            status.value = Daemon.run(config)
            finished.signal()
        }
        thread.start()
        let client = try connect(config.paths.socket)
        defer { client.close() }

        let daemon = try client.call(method: .daemonStatus, params: [String: String](), as: DaemonStatus.self)
        XCTAssertEqual(daemon.home, home)
        XCTAssertEqual(daemon.pid, getpid())
        XCTAssertEqual(Set(daemon.jobs.keys), Set(TransferState.allCases.map(\.rawValue)))
        XCTAssertEqual(try client.call(method: .transferList), .array([]))
        XCTAssertEqual(
            try client.call(method: .transferList, params: .object(["limit": .int(5), "state": .string("queued")])),
            .array([]))

        // A refused request of a list names its index, and nothing is queued.
        var good = TransferRequest(url: "http://127.0.0.1:9/a")
        good.destination = home + "/a"
        var bad = TransferRequest(url: "ftp://127.0.0.1/b")
        bad.destination = home + "/b"
        let refusal = rpcError {
            try client.call(method: .transferAddMany, params: AddManyParams(requests: [good, bad]), as: JSONValue.self)
        }
        XCTAssertEqual(refusal?.code, RPCErrorCode.invalidParams)
        XCTAssertEqual(refusal?.data, .object(["code": .string("invalid_request"), "index": .int(1)]))
        // So is a part of a batch, counted from the batch's first request.
        let part = try client.call(
            method: .transferAddMany, params: AddManyParams(requests: [good], batch: "B1", final: false),
            as: AddManyPartResult.self)
        XCTAssertEqual(part, AddManyPartResult(batch: "B1", received: 1))
        let late = rpcError {
            try client.call(
                method: .transferAddMany, params: AddManyParams(requests: [good], batch: "B1", final: true),
                as: JSONValue.self)
        }
        XCTAssertEqual(late?.data, .object(["code": .string("destination_exists"), "index": .int(1)]))
        XCTAssertEqual(try client.call(method: .transferList), .array([]))

        XCTAssertEqual(
            rpcError { try client.call(method: .transferGet, params: GetParams(id: 99), as: JSONValue.self) }?.code,
            RPCErrorCode.notFound)
        XCTAssertEqual(rpcError { try client.call(method: "no.such") }?.code, RPCErrorCode.methodNotFound)

        XCTAssertEqual(try client.call(method: .daemonShutdown), .object([:]))
        XCTAssertEqual(finished.wait(timeout: .now() + 10), .success, "Daemon.run did not return")
        XCTAssertEqual(status.value, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: config.paths.socket))
    }
}
