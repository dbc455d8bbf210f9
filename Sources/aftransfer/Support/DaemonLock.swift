#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The daemon's home lock (`<home>/aftransferd.lock`), seen from the CLI: a running daemon holds an
/// exclusive `flock` on it for its whole life, and the kernel releases it when the daemon exits,
/// even while the exited daemon is a zombie its parent has not reaped yet.
enum DaemonLock {
    /// Whether a daemon holds the lock at `path`: tries `flock(LOCK_EX|LOCK_NB)` and, when that
    /// succeeds, releases it at once (so that a daemon starting now is not turned away).
    /// - Parameter path: the lock file.
    /// - Returns: true while it is held, false when it is free, nil when the file cannot be opened
    ///   (no such file: no daemon ever ran in that home, or it is another home's socket).
    static func isHeld(at path: String) -> Bool? {
        // Read-only and without O_CREAT: looking must not create the daemon's file.
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { _ = close(fd) }
        while true {
            if flock(fd, LOCK_EX | LOCK_NB) == 0 {
                _ = flock(fd, LOCK_UN)
                return false
            }
            if errno == EINTR { continue }
            return errno == EWOULDBLOCK ? true : nil
        }
    }
}
