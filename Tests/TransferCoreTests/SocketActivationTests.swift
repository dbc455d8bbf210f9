import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

/// ``SocketActivation``: systemd's LISTEN_* and NOTIFY_SOCKET protocols without libsystemd.
final class SocketActivationTests: XCTestCase {
    func testThatNoSocketIsTakenWhenTheVariablesNameAnotherProcessOrNone() {
        XCTAssertNil(SocketActivation.takeListener(environment: [:]))
        XCTAssertNil(SocketActivation.takeListener(environment: ["LISTEN_PID": "1", "LISTEN_FDS": "1"]))
        XCTAssertNil(SocketActivation.takeListener(environment: ["LISTEN_PID": "\(getpid())", "LISTEN_FDS": "0"]))
    }

    func testThatReadinessIsOneDatagramToTheNotifySocketAndItsBoundPathIsKnown() throws {
        let dir = try makeTemporaryHome("aft-notify")
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let path = dir + "/notify"
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue), 0)
        XCTAssertGreaterThanOrEqual(fd, 0)
        defer { close(fd) }
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            for (i, b) in path.utf8.enumerated() { raw[i] = b }
        }
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        XCTAssertEqual(bound, 0)
        XCTAssertEqual(SocketActivation.boundPath(of: fd), path)
        XCTAssertTrue(SocketActivation.notify("READY=1", socketPath: path))
        var buffer = [UInt8](repeating: 0, count: 64)
        let n = recv(fd, &buffer, buffer.count, Int32(MSG_DONTWAIT))
        XCTAssertEqual(n, 7)
        XCTAssertEqual(String(decoding: buffer.prefix(max(n, 0)), as: UTF8.self), "READY=1")
        XCTAssertFalse(SocketActivation.notify("READY=1", socketPath: dir + "/nobody"))
    }
}
