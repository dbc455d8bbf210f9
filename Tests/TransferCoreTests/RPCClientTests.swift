import Foundation
import XCTest

@testable import TransferCore

final class RPCClientTests: XCTestCase {
    // MARK: - Line framing

    func testThatALineSplitOverSeveralReadsIsReturnedWhole() throws {
        var buffer = LineBuffer(maximumLineLength: 1024)
        buffer.append(Array(#"{"jsonrpc":"2.0","#.utf8))
        XCTAssertNil(try buffer.nextLine())
        buffer.append(Array(#""id":1}"#.utf8))
        XCTAssertNil(try buffer.nextLine())
        buffer.append(Array("\n".utf8))
        XCTAssertEqual(try buffer.nextLine().map { String(decoding: $0, as: UTF8.self) }, #"{"jsonrpc":"2.0","id":1}"#)
        XCTAssertNil(try buffer.nextLine())
    }

    func testThatSeveralLinesInOneReadAreReturnedInOrderWithoutEmptyLinesOrCarriageReturns() throws {
        var buffer = LineBuffer(maximumLineLength: 1024)
        buffer.append(Array("one\r\n\ntwo\nthr".utf8))
        XCTAssertEqual(try buffer.nextLine().map { String(decoding: $0, as: UTF8.self) }, "one")
        XCTAssertEqual(try buffer.nextLine().map { String(decoding: $0, as: UTF8.self) }, "two")
        XCTAssertNil(try buffer.nextLine())
        buffer.append(Array("ee\n".utf8))
        XCTAssertEqual(try buffer.nextLine().map { String(decoding: $0, as: UTF8.self) }, "three")
    }

    func testThatALineLongerThanTheLimitIsRefused() {
        var buffer = LineBuffer(maximumLineLength: 8)
        buffer.append(Array("0123456789".utf8))
        XCTAssertThrowsError(try buffer.nextLine())
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
}
