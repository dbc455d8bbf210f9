import Glibc
import XCTest

@testable import TransferBase

final class SocketPeerTests: XCTestCase {
    func testThatThePeerOfAUnixSocketIsThisUser() throws {
        var fds: [Int32] = [-1, -1]
        XCTAssertEqual(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds), 0)
        defer { fds.forEach { close($0) } }
        XCTAssertEqual(SocketPeer.uid(fds[0]), getuid())
    }

    func testThatAnythingButASocketHasNoPeer() {
        XCTAssertNil(SocketPeer.uid(-1))
        let fd = open("/dev/null", O_RDONLY)
        defer { close(fd) }
        XCTAssertNil(SocketPeer.uid(fd))
    }
}
