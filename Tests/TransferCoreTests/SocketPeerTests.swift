import Glibc
import XCTest

@testable import TransferBase

final class SocketPeerTests: XCTestCase {
    func testThatThePeerOfAUnixSocketIsThisProcessItsUserAndGroup() throws {
        // As root (CI), the socket is made with another effective group, so that a uid read
        // where the gid is (or the other way round) cannot pass for the right one.
        let otherGroup: gid_t = 54_321
        let changedGroup = geteuid() == 0 && setegid(otherGroup) == 0
        var fds: [Int32] = [-1, -1]
        let made = socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &fds)
        if changedGroup { XCTAssertEqual(setegid(0), 0) }
        XCTAssertEqual(made, 0)
        defer { fds.forEach { close($0) } }
        let peer = try XCTUnwrap(SocketPeer.credentials(fds[0]))
        XCTAssertEqual(peer.pid, getpid())
        XCTAssertEqual(peer.uid, geteuid())
        XCTAssertEqual(peer.gid, changedGroup ? otherGroup : getegid())
        XCTAssertEqual(SocketPeer.uid(fds[1]), geteuid())
    }

    func testThatAnythingButASocketHasNoPeer() {
        XCTAssertNil(SocketPeer.credentials(-1))
        let fd = open("/dev/null", O_RDONLY)
        defer { close(fd) }
        XCTAssertNil(SocketPeer.uid(fd))
    }
}
