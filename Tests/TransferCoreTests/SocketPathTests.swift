import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

final class SocketPathTests: TemporaryDirectoryTestCase {
    /// A Unix socket bound at `path`; listening when `listen`, else left behind as a dead file.
    private func socketFile(_ path: String, listening: Bool) throws -> Int32 {
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_un()
        address.sun_family = sa_family_t(AF_UNIX)
        let bytes = Array(path.utf8)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        let rc = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size))
            }
        }
        XCTAssertEqual(rc, 0)
        if listening { XCTAssertEqual(listen(fd, 4), 0) }
        return fd
    }

    func testThatNothingThereIsFineAndAMissingDirectoryIsNamed() throws {
        XCTAssertNoThrow(try SocketPath.clear(dir + "/a.sock"))
        XCTAssertThrowsError(try SocketPath.clear(dir + "/nodir/a.sock")) { error in
            XCTAssertTrue("\(error)".contains("directory \(dir!)/nodir does not exist"), "\(error)")
        }
    }

    func testThatAStaleSocketIsRemoved() throws {
        let path = dir + "/stale.sock"
        close(try socketFile(path, listening: false))
        XCTAssertFalse(SocketPath.answers(path))
        try SocketPath.clear(path)
        XCTAssertFalse(FileManager.default.fileExists(atPath: path))
    }

    func testThatALiveSocketAndAFileThatIsNoSocketAreLeftAlone() throws {
        let live = dir + "/live.sock"
        let fd = try socketFile(live, listening: true)
        defer { close(fd) }
        XCTAssertTrue(SocketPath.answers(live))
        XCTAssertThrowsError(try SocketPath.clear(live)) { XCTAssertTrue("\($0)".contains("answers on"), "\($0)") }
        XCTAssertTrue(FileManager.default.fileExists(atPath: live))

        let file = dir + "/important.txt"
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data("keep me".utf8)))
        XCTAssertThrowsError(try SocketPath.clear(file)) { XCTAssertTrue("\($0)".contains("is not a socket"), "\($0)") }
        XCTAssertEqual(try String(contentsOfFile: file, encoding: .utf8), "keep me")
    }
}
