#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Who is at the other end of a connected Unix socket (`SO_PEERCRED`): the daemon serves only its
/// own user, and the CLI says so when another user's daemon closes its connection.
public enum SocketPeer {
    /// The process at the other end of `fd` and its user and group, as the kernel recorded them
    /// when the connection was made; nil when the kernel does not say (not a Unix socket).
    public static func credentials(_ fd: Int32) -> (pid: pid_t, uid: uid_t, gid: gid_t)? {
        // `struct ucred` (pid, uid, gid) needs _GNU_SOURCE, which Glibc's module does not set:
        // its layout, three 32-bit fields.
        var credentials: (pid: pid_t, uid: uid_t, gid: gid_t) = (0, 0, 0)
        var length = socklen_t(MemoryLayout.size(ofValue: credentials))
        guard getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &credentials, &length) == 0,
            Int(length) == MemoryLayout.size(ofValue: credentials)
        else { return nil }
        return credentials
    }

    /// The uid of the process at the other end of `fd`, or nil when the kernel does not say.
    public static func uid(_ fd: Int32) -> uid_t? { credentials(fd)?.uid }
}
