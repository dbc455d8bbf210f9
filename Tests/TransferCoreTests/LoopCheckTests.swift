import XCTest

@testable import TransferBase
@testable import TransferCore

final class LoopCheckTests: XCTestCase {
    func testThatACheckArmedOutsideIOCallbacksFiresWithoutWaitingForIO() throws {
        let loop = try EventLoop()
        var fired = 0
        let check = LoopCheck(loop: loop) { fired += 1 }
        // Armed outside any callback, then from a timer: nothing else is active either time, so
        // a check that let the loop wait for I/O would block for ever.
        check.arm()
        check.arm()  // once is enough
        let started = Date()
        loop.run()
        XCTAssertEqual(fired, 1)
        let timer = LoopTimer(loop: loop)
        timer.start(after: 1) { check.arm() }
        loop.run()
        XCTAssertEqual(fired, 2)
        XCTAssertLessThan(Date().timeIntervalSince(started), 1)
        timer.close()
        check.close()
        loop.run()
    }

    func testThatWorkFinishedInOnePassIsTakenTogether() throws {
        let loop = try EventLoop()
        var finished = 0
        var takenAt: [Int] = []
        let check = LoopCheck(loop: loop) { takenAt.append(finished) }
        // Eight pool items that end together are handed back in one pass: the check sees all.
        for _ in 0..<8 {
            WorkPool.run(loop, { 0 }) { _ in
                finished += 1
                check.arm()
            }
        }
        loop.run()
        XCTAssertEqual(finished, 8)
        XCTAssertEqual(takenAt.last, 8)
        XCTAssertLessThan(takenAt.count, 8, "each item was taken on its own")
        check.close()
        loop.run()
    }
}
