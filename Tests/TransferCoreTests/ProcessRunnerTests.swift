import XCTest

@testable import TransferBase
@testable import TransferCore

/// ``ProcessRunner``: a child on the loop with stdin, output and a time bound.
final class ProcessRunnerTests: XCTestCase {
    private func run(_ script: String, input: String = "", limit: Int = 4096, timeout: Double = 10) throws
        -> ProcessRunner.Outcome
    {
        let loop = try EventLoop()
        var outcome: ProcessRunner.Outcome?
        var runner: ProcessRunner? = try ProcessRunner(
            loop: loop, executable: "/bin/sh", arguments: ["sh", "-c", script], environment: ["A_VAR": "a value"],
            input: Array(input.utf8), outputLimit: limit, timeout: timeout
        ) { outcome = $0 }
        loop.run()
        runner = nil
        XCTAssertNil(runner)
        return try XCTUnwrap(outcome)
    }

    func testThatTheChildReadsStdinSeesItsEnvironmentAndItsOutputAndStatusComeBack() throws {
        let o = try run("cat; echo \" $A_VAR\"; echo err >&2; exit 7", input: "hello")
        XCTAssertEqual(o.exitStatus, 7)
        XCTAssertEqual(String(decoding: o.output, as: UTF8.self), "hello a value\nerr\n")
        XCTAssertFalse(o.timedOut)
    }

    func testThatOnlyTheFirstBytesOfOutputAreKept() throws {
        let o = try run("head -c 10000 /dev/zero", limit: 4096)
        XCTAssertEqual(o.output.count, 4096)
        XCTAssertEqual(o.exitStatus, 0)
    }

    func testThatAChildPastItsTimeBoundIsKilledWithWhatItStarted() throws {
        let start = Date()
        let o = try run("sleep 30 & sleep 30", timeout: 0.3)
        XCTAssertTrue(o.timedOut)
        XCTAssertEqual(o.exitStatus, 128 + Int(SIGKILL))
        XCTAssertLessThan(Date().timeIntervalSince(start), 5)
    }

    func testThatAMissingProgramIsAnError() throws {
        let loop = try EventLoop()
        XCTAssertThrowsError(
            try ProcessRunner(
                loop: loop, executable: "/nonexistent/x", arguments: ["x"], environment: [:], input: [],
                outputLimit: 10, timeout: 1
            ) { _ in })
        loop.run()
    }
}
