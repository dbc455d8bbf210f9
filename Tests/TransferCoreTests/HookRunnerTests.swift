import XCTest

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
}
