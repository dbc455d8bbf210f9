import CUV
import Foundation

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Readies the path of the daemon's listening socket without harming what lies there: the one
/// place that decides what may be replaced. A socket nobody listens on any more (left by a daemon
/// that crashed) is removed; a socket some process still answers on (another daemon, perhaps of
/// another home with the same `--socket`) and anything that is not a socket are refused, as is a
/// path whose directory does not exist (which libuv would report as "permission denied").
enum SocketPath {
    /// Why the path cannot take the socket, as the daemon says it.
    struct Refusal: Error, CustomStringConvertible, Equatable {
        /// The message.
        let description: String
    }

    /// Clears `path` for `bind`.
    /// - Throws: ``Refusal``.
    static func clear(_ path: String) throws {
        // Longer than `sun_path` holds, libuv would bind a cut-short path nobody can reach.
        let length = path.utf8.count
        guard length <= UnixSocketAddress.maximumLength else {
            throw Refusal(
                description:
                    "cannot bind \(path): a socket path has at most \(UnixSocketAddress.maximumLength) bytes (this one \(length))"
            )
        }
        var st = stat()
        guard lstat(path, &st) == 0 else {
            let code = errno
            guard code == ENOENT else { throw Refusal(description: "cannot inspect \(path): \(reason(code))") }
            let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
            var dir = stat()
            guard stat(directory, &dir) == 0, (dir.st_mode & S_IFMT) == S_IFDIR else {
                throw Refusal(description: "cannot bind \(path): directory \(directory) does not exist")
            }
            return
        }
        guard (st.st_mode & S_IFMT) == S_IFSOCK else {
            throw Refusal(description: "\(path) exists and is not a socket; it is left alone")
        }
        if answers(path) {
            throw Refusal(description: "another process (another daemon?) answers on \(path); it is left alone")
        }
        if unlink(path) != 0 && errno != ENOENT {
            throw Refusal(description: "cannot remove the stale socket \(path): \(reason(errno))")
        }
    }

    /// Whether some process accepts connections on the Unix socket at `path` (only a refused
    /// connection, or no socket at all, counts as no one).
    static func answers(_ path: String) -> Bool {
        guard let address = UnixSocketAddress(path) else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let rc = address.withSockaddr { connect(fd, $0, $1) }
        return rc == 0 || (errno != ECONNREFUSED && errno != ENOENT)
    }

    private static func reason(_ code: Int32) -> String { String(cString: strerror(code)) }
}
