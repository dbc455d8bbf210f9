import CUV
import Foundation
import Glibc

/// systemd's socket activation and readiness protocol, without libsystemd: the listening socket
/// passed as fd 3 (`LISTEN_FDS`, `LISTEN_PID`; sd_listen_fds(3)) and `READY=1` / `STOPPING=1`
/// datagrams to `$NOTIFY_SOCKET` (sd_notify(3)).
public enum SocketActivation {
    /// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
    public static let firstFD: Int32 = 3

    /// The listening socket systemd passed to this process, or nil when none was (or the
    /// variables name another process). The variables are removed, so that no child (a hook)
    /// takes them for its own, and the descriptor is made close-on-exec.
    /// - Parameter environment: the process environment (defaults to the real one).
    public static func takeListener(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> Int32? {
        defer {
            unsetenv("LISTEN_PID")
            unsetenv("LISTEN_FDS")
            unsetenv("LISTEN_FDNAMES")
        }
        guard let pid = environment["LISTEN_PID"].flatMap(Int32.init), pid == getpid(),
            let count = environment["LISTEN_FDS"].flatMap(Int32.init), count >= 1
        else { return nil }
        let fd = firstFD
        let flags = fcntl(fd, F_GETFD)
        guard flags >= 0 else { return nil }
        _ = fcntl(fd, F_SETFD, flags | FD_CLOEXEC)
        return fd
    }

    /// The path a Unix socket is bound to (what a socket unit's `ListenStream=` named), or nil
    /// for an unnamed or abstract one.
    public static func boundPath(of fd: Int32) -> String? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let rc = withUnsafeMutablePointer(to: &address) { ptr in
            ptr.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        guard rc == 0, address.sun_family == sa_family_t(AF_UNIX) else { return nil }
        let path = withUnsafeBytes(of: &address.sun_path) { raw -> String? in
            guard let first = raw.first, first != 0 else { return nil }
            let bytes = raw.prefix { $0 != 0 }
            return String(decoding: bytes, as: UTF8.self)
        }
        return path
    }

    /// The readiness socket systemd gave (`$NOTIFY_SOCKET`), taken out of the environment so
    /// that children do not inherit it; nil when not run by systemd with `Type=notify`.
    public static func takeNotifySocket(
        environment: [String: String] = ProcessInfo.processInfo.environment
    ) -> String? {
        defer { unsetenv("NOTIFY_SOCKET") }
        guard let path = environment["NOTIFY_SOCKET"], !path.isEmpty else { return nil }
        return path
    }

    /// Sends one sd_notify message (`READY=1`, `STOPPING=1`) to `socketPath` (a path, or an
    /// abstract name starting with `@`). Best effort: false when it could not be sent.
    @discardableResult
    public static func notify(_ message: String, socketPath: String) -> Bool {
        guard let address = UnixSocketAddress(socketPath, abstract: true) else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        let bytes = Array(message.utf8)
        let sent = address.withSockaddr { sa, length in
            bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), sa, length) }
        }
        return sent == bytes.count
    }
}
