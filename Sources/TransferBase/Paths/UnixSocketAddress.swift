import Foundation

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The address of a Unix socket (`sockaddr_un`): the one place that fills `sun_path`, for the
/// daemon's socket (`SocketPath`), the CLI's connection (``RPCClient``) and systemd's notify
/// socket (`SocketActivation`, both in the daemon).
package struct UnixSocketAddress {
    /// The most bytes a name may have (`sun_path` less its terminating NUL).
    package static let maximumLength = MemoryLayout.size(ofValue: sockaddr_un().sun_path) - 1

    private var address = sockaddr_un()
    /// The length `connect` and `sendto` are given.
    package let length: socklen_t

    /// The address of `path`; with `abstract`, a leading `@` names Linux's abstract namespace
    /// (systemd's `NOTIFY_SOCKET`). Nil for an empty or too long name.
    package init?(_ path: String, abstract: Bool = false) {
        var bytes = Array(path.utf8)
        let isAbstract = abstract && bytes.first == UInt8(ascii: "@")
        if isAbstract { bytes[0] = 0 }
        guard !bytes.isEmpty, bytes.count <= Self.maximumLength else { return nil }
        address.sun_family = sa_family_t(AF_UNIX)
        withUnsafeMutableBytes(of: &address.sun_path) { raw in
            raw.copyBytes(from: bytes)
            raw[bytes.count] = 0
        }
        // An abstract name is exactly its bytes; a path is the whole structure (NUL-terminated).
        length =
            isAbstract
            ? socklen_t(MemoryLayout<sa_family_t>.size + bytes.count) : socklen_t(MemoryLayout<sockaddr_un>.size)
    }

    /// Calls `body` with the address as a `sockaddr` and its length.
    package func withSockaddr<T>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> T) -> T {
        withUnsafePointer(to: address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }
}
