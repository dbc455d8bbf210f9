import XCTest

@testable import TransferBase
@testable import TransferCore

final class TransferStateTests: XCTestCase {
    func testThatEndedStatesAreFinalAndOthersAreNot() {
        XCTAssertTrue(TransferState.completed.isFinal)
        XCTAssertTrue(TransferState.failed.isFinal)
        XCTAssertTrue(TransferState.cancelled.isFinal)
        XCTAssertFalse(TransferState.waiting.isFinal)
    }

    func testThatACompletedJobCannotBeResumedOrPaused() {
        XCTAssertFalse(TransferState.completed.canTransition(to: .queued))
        XCTAssertFalse(TransferState.completed.canTransition(to: .paused))
        XCTAssertTrue(TransferState.failed.canTransition(to: .queued))
        XCTAssertTrue(TransferState.waiting.canTransition(to: .paused))
    }
}
