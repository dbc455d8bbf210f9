import XCTest

@testable import TransferBase
@testable import TransferCore

/// ``HookRunner``: hooks keyed by their owner; a hook of an ending the job leaves goes on as the
/// owed record's (``HookRunner/adopt(_:by:)``), running or still waiting for a slot.
final class HookRunnerTests: XCTestCase {
    func testThatARunningAndAWaitingHookFinishAsTheOwnerThatAdoptedThem() throws {
        let loop = try EventLoop()
        let hooks = HookRunner(loop: loop)
        var finished: [(HookRunner.Owner, String)] = []
        func run(_ owner: HookRunner.Owner, _ word: String) {
            hooks.run(owner, command: "sleep 0.2; echo \(word)", input: [], environment: [:]) { owner, result, _ in
                finished.append((owner, result.output))
            }
        }
        for id in 1...HookRunner.maxConcurrent { run(.job(Int64(id)), "j\(id)") }
        run(.job(99), "waiting")
        XCTAssertTrue(hooks.isRunning(.job(99)), "one waiting for a slot counts as running")
        XCTAssertTrue(hooks.adopt(.job(1), by: .owed(7)))
        XCTAssertTrue(hooks.adopt(.job(99), by: .owed(8)))
        XCTAssertFalse(hooks.adopt(.job(42), by: .owed(9)), "nothing runs for job 42")
        XCTAssertFalse(hooks.isRunning(.job(1)))
        XCTAssertFalse(hooks.isRunning(.job(99)))
        XCTAssertTrue(hooks.isRunning(.owed(7)))
        XCTAssertTrue(hooks.isRunning(.owed(8)))
        loop.run()
        XCTAssertEqual(finished.count, HookRunner.maxConcurrent + 1)
        let byOwner = Dictionary(finished.map { ($0.0, $0.1) }, uniquingKeysWith: { a, _ in a })
        XCTAssertEqual(byOwner[.owed(7)], "j1\n")
        XCTAssertEqual(byOwner[.owed(8)], "waiting\n")
        XCTAssertNil(byOwner[.job(1)])
        XCTAssertEqual(byOwner[.job(2)], "j2\n")
        XCTAssertFalse(hooks.isRunning(.owed(7)))
    }

    /// What a hook's shell leaves running in the background is killed at the hook's time bound,
    /// not left for ever (rpc.md: "at most 60 s, then its process group is killed").
    func testThatWhatAFinishedHookLeftRunningIsKilledAtItsBound() throws {
        let loop = try EventLoop()
        let hooks = HookRunner(loop: loop)
        hooks.timeout = 1.0
        let pidFile = NSTemporaryDirectory() + "aft-hook-bg-\(getpid()).pid"
        defer { unlink(pidFile) }
        var status: Int?
        var finishedAt: Date?
        let start = Date()
        hooks.run(.job(1), job: 1, command: "sleep 30 & echo $! > \(pidFile)", input: [], environment: [:]) {
            _, result, _ in
            status = result.exitStatus
            finishedAt = Date()
        }
        // SPEC: one log line an event, with the job id (an outside audit found this one without).
        let log = capturingStderr { loop.run() }
        XCTAssertTrue(log.contains(" job=1 killing what a hook left running"), log)
        XCTAssertEqual(status, 0)
        XCTAssertLessThan(try XCTUnwrap(finishedAt).timeIntervalSince(start), 0.9, "the hook finished at once")
        let pid = try XCTUnwrap(
            Int32(String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)))
        // The loop ran until the bound's timer: the background sleep is gone (killed, then reaped by init).
        XCTAssertGreaterThanOrEqual(Date().timeIntervalSince(start), 0.9)
        let deadline = Date().addingTimeInterval(5)
        while kill(pid, 0) == 0 && Date() < deadline { usleep(20_000) }
        XCTAssertNotEqual(kill(pid, 0), 0, "the hook's background process outlived its bound")
    }

    /// A daemon that stops ends the hooks that run (recorded as 143, so they do not run again)
    /// and starts no waiting one.
    func testThatStoppingEndsTheRunningHooksAndStartsNoOther() throws {
        let loop = try EventLoop()
        let hooks = HookRunner(loop: loop)
        var finished: [HookRunner.Owner: HookResult] = [:]
        for id in 1...(HookRunner.maxConcurrent + 1) {
            hooks.run(.job(Int64(id)), command: "echo started; sleep 30", input: [], environment: [:]) {
                owner, result, _ in
                finished[owner] = result
            }
        }
        let stopper = LoopTimer(loop: loop)
        stopper.start(after: 300) {
            hooks.stopAll()
            stopper.close()
        }
        let start = Date()
        loop.run()
        XCTAssertLessThan(Date().timeIntervalSince(start), 5, "the hooks were not ended")
        XCTAssertEqual(finished.count, HookRunner.maxConcurrent, "the waiting hook started")
        for id in 1...HookRunner.maxConcurrent {
            let result = try XCTUnwrap(finished[.job(Int64(id))])
            XCTAssertEqual(result.exitStatus, HookRunner.stoppedStatus)
            XCTAssertEqual(result.output, "started\n")
        }
        XCTAssertFalse(hooks.run(.job(50), command: "true", input: [], environment: [:]) { _, _, _ in })
    }

    /// SPEC: the first 4 KiB of output. A character the limit cut in two is left out (it showed as
    /// U+FFFD, and the text came to 4,098 bytes); bytes that are not UTF-8 never make it longer.
    func testThatTheOutputIsTextOfAtMost4KiBWithoutAHalfCharacter() {
        let e = Array("é".utf8)  // 2 bytes
        let cut = [UInt8](repeating: UInt8(ascii: "x"), count: 4095) + [e[0]]
        XCTAssertEqual(HookRunner.text(of: cut), String(repeating: "x", count: 4095))
        let whole = [UInt8](repeating: UInt8(ascii: "x"), count: 4094) + e
        XCTAssertEqual(HookRunner.text(of: whole), String(repeating: "x", count: 4094) + "é")
        let euro = Array("€".utf8)  // 3 bytes, cut after 2
        XCTAssertEqual(HookRunner.text(of: Array("ab".utf8) + euro.prefix(2)), "ab")
        let binary = [UInt8](repeating: 0xFF, count: 4096)
        let text = HookRunner.text(of: binary)
        XCTAssertLessThanOrEqual(text.utf8.count, 4096)
        XCTAssertTrue(text.unicodeScalars.allSatisfy { $0 == "\u{FFFD}" })
        XCTAssertEqual(HookRunner.text(of: []), "")
    }
}
