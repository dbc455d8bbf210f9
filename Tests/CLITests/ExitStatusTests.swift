import TransferBase
import XCTest

@testable import aftransfer

final class ExitStatusTests: XCTestCase {
    func testThatRefusedInputUnknownIdsAndInapplicableCommandsExitWithStatusTwo() {
        let codes = [
            RPCErrorCode.parseError, RPCErrorCode.invalidRequest, RPCErrorCode.methodNotFound,
            RPCErrorCode.invalidParams, RPCErrorCode.notFound, RPCErrorCode.refused, RPCErrorCode.tooLarge,
        ]
        for code in codes {
            XCTAssertEqual(RPCError(code: code, message: "").exitStatus, 2, "code \(code)")
        }
    }

    func testThatADaemonShuttingDownExitsWithStatusThreeAndAnInternalErrorWithOne() {
        XCTAssertEqual(RPCError(code: RPCErrorCode.shuttingDown, message: "").exitStatus, 3)
        XCTAssertEqual(RPCError(code: RPCErrorCode.internalError, message: "").exitStatus, 1)
        XCTAssertEqual(RPCError(code: -1, message: "").exitStatus, 1)
    }

    func testThatAnUnreachableOrUnstartableDaemonExitsWithStatusThree() {
        XCTAssertEqual(ClientError.connectionClosed.exitStatus, 3)
        XCTAssertEqual(ClientError.unreachable(path: "/x", reason: "no").exitStatus, 3)
        XCTAssertEqual(DaemonLauncher.LaunchError(message: "no").exitStatus, 3)
    }

    func testThatARefusalsMessageIsFoundWhicheverErrorTheValidatorThrows() {
        XCTAssertEqual(Submission.message(of: TransferError(.invalidRequest, "bad URL")), "bad URL")
        XCTAssertEqual(Submission.message(of: RPCError.refusedInput(.invalidRequest, "bad scheme")), "bad scheme")
    }
}
