import XCTest

@testable import TransferBase
@testable import TransferCore

final class CheckpointerTests: XCTestCase {
    func testThatASyncStartedBeforeThePartWasDiscardedRecordsNothing() {
        var recorded: [(Int64, Int64)] = []
        let c = Checkpointer(interval: 1) { recorded.append(($0, $1)) }
        let before = c.generation(3)
        let patch = c.discard(3)
        XCTAssertEqual(patch.durableBytes, 0)
        XCTAssertEqual(patch.etag, .some(nil))
        c.recorded(3, generation: before, offset: 500)
        XCTAssertTrue(recorded.isEmpty)
        c.recorded(3, generation: c.generation(3), offset: 20)
        XCTAssertEqual(recorded.map(\.1), [20])
    }

    func testThatGenerationsAreKeptPerJob() {
        var recorded: [Int64] = []
        let c = Checkpointer(interval: 1) { id, _ in recorded.append(id) }
        let a = c.generation(1)
        _ = c.discard(2)
        c.recorded(1, generation: a, offset: 1)
        XCTAssertEqual(recorded, [1])
    }

    func testThatRoundsComeAtTheIntervalOfLoopTime() {
        let c = Checkpointer(interval: 1) { _, _ in }
        XCTAssertTrue(c.roundDue(now: 5_000))
        XCTAssertFalse(c.roundDue(now: 5_400))
        XCTAssertFalse(c.roundDue(now: 5_999))
        XCTAssertTrue(c.roundDue(now: 6_000))
    }
}
