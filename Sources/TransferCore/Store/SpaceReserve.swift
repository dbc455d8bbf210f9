import Foundation

/// A file of reserved space beside the job database (`<home>/aftransferd.reserve`): when the
/// home's disk fills up and a commit fails, the daemon deletes it and commits again, so the
/// bookkeeping of running transfers (checkpoints, the row written before a finished download is
/// moved into place) goes on while new work is refused. It is made again once the disk has room.
/// Loop-thread only.
final class SpaceReserve {
    /// The reserve's default size.
    static let defaultSize: Int64 = 1 << 20

    /// The reserve file's path.
    let path: String
    /// Its size.
    let size: Int64

    /// Creates a reserve at `path` (nothing is written until ``acquire()``).
    init(path: String, size: Int64 = SpaceReserve.defaultSize) {
        self.path = path
        self.size = size
    }

    /// Whether the last ``acquire()`` failed because the file would pass the process's file-size
    /// limit (`ulimit -f`): no disk is full then.
    private(set) var overFileSizeLimit = false

    /// Whether the reserve file is in place, whole.
    var isHeld: Bool {
        var st = stat()
        return stat(path, &st) == 0 && Int64(st.st_size) >= size
    }

    /// Makes the reserve file (blocks allocated, not a sparse file). Returns whether it is held;
    /// a partial file is removed.
    @discardableResult
    func acquire() -> Bool {
        if isHeld { return true }
        let fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { return false }
        fchmod(fd, 0o600)  // an existing file keeps its mode through `open`
        let rc = posix_fallocate(fd, 0, off_t(size))
        let synced = rc == 0 && fsync(fd) == 0
        close(fd)
        if !synced { unlink(path) }
        overFileSizeLimit = rc == EFBIG
        return synced
    }

    /// Deletes the reserve file, freeing its space. Returns whether there was one.
    @discardableResult
    func release() -> Bool {
        unlink(path) == 0
    }
}
