import Foundation

/// Runs `fdatasync` on libuv's thread pool and reports back on the loop thread.
/// Loop-thread only.
public enum FileSync {
    /// Starts an `fdatasync(fd)` off the loop, first giving the file `mode` when one is passed (a
    /// part is created with the daemon's umask, 077, and gets the user's mode before it is moved
    /// into place: on the pool, not with a system call of its own on the loop). `completion` gets
    /// 0 or a negative errno.
    public static func fdatasync(
        loop: EventLoop, fd: Int32, mode: mode_t? = nil, completion: @escaping (Int32) -> Void
    ) {
        WorkPool.run(loop, { -syncNow(fd: fd, mode: mode) }, done: completion)
    }

    /// `fdatasync(fd)` now, on the calling thread (a pool thread), first giving the file `mode`
    /// when one is passed. Returns 0 or an errno.
    public static func syncNow(fd: Int32, mode: mode_t?) -> Int32 {
        if let mode, fchmod(fd, mode) != 0 { return errno }
        return Glibc.fdatasync(fd) == 0 ? 0 : errno
    }
}
