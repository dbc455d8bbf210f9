import CUV
import Foundation

/// An open file being written by a transfer (a download's `.aftpart`), with serialized
/// off-loop `fdatasync`s. The descriptor is closed only after the last sync finished
/// (``close()`` defers it). Loop-thread only.
public final class PartFile {
    /// The file descriptor.
    public let fd: Int32
    /// The path of the file.
    public let path: String
    private let loop: EventLoop
    /// The user's mode, given to the file by its first sync (the daemon's umask is 077), so it
    /// has it before it is moved into place.
    private var mode: mode_t?
    private var inFlight = false
    private var waiters: [(Bool) -> Void] = []
    private var closeRequested = false
    private var closed = false
    /// The errno of the last sync that failed (0 if none did): a file system that allocates late
    /// (NFS, a full thin volume) may report `ENOSPC` only here.
    public private(set) var lastSyncErrno: Int32 = 0
    /// Bytes written since the last writeback was started, and the span of the file they lie in
    /// (a segmented download writes at several offsets).
    private var unflushed = 0
    private var dirtyStart = Int64.max
    private var dirtyEnd: Int64 = 0

    /// Dirty bytes after which their writeback is started (``startWriteback()``).
    public static let writeBehindBytes = 16 << 20

    /// Opens (creating) `path` for writing; its bytes are kept unless `truncate`.
    public init(loop: EventLoop, path: String, mode: mode_t, truncate: Bool = false) throws {
        let fd: Int32
        switch Self.openPart(path, mode: mode, truncate: truncate) {
        case .success(let opened): fd = opened
        case .failure(.errno(let e)): throw FileErrors.error(e, "cannot open \(path)")
        case .failure(.notAFile(let error)): throw error
        }
        self.fd = fd
        self.mode = mode
        self.path = path
        self.loop = loop
    }

    /// Why ``openPart(_:mode:truncate:)`` opened nothing.
    enum OpenFailure: Error {
        /// The system's error (a missing directory, no space, no permission).
        case errno(Int32)
        /// Something that is not a regular file holds the part's name: the job's error.
        case notAFile(TransferError)
    }

    /// Opens (creating) a part for writing: never through a symbolic link (the bytes would go to
    /// the link's target, and the link would be renamed into place as the download), and never
    /// waiting on a FIFO or a device (the daemon's loop would wait for a reader): anything there
    /// but a regular file is refused (`io`, not retryable; nothing is written). `O_NONBLOCK` has
    /// no effect on a regular file's writes.
    /// - Returns: the descriptor, or why not.
    static func openPart(_ path: String, mode: mode_t, truncate: Bool) -> Result<Int32, OpenFailure> {
        let flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | (truncate ? O_TRUNC : 0)
        let fd = open(path, flags, mode)
        func notAFile(_ what: String) -> Result<Int32, OpenFailure> {
            .failure(.notAFile(TransferError(.io, "cannot open \(path): \(what), not a part file", retryable: false)))
        }
        guard fd >= 0 else {
            let e = errno
            if e == ELOOP { return notAFile("it is a symbolic link") }
            if e == ENXIO { return notAFile("it is a FIFO or a device") }  // a FIFO without a reader
            return .failure(.errno(e))
        }
        var info = stat()
        guard fstat(fd, &info) == 0, (info.st_mode & S_IFMT) == S_IFREG else {
            _ = Glibc.close(fd)
            return notAFile("it is not a regular file")
        }
        return .success(fd)
    }

    /// Deletes the part at `path` if a regular file holds the name (and, with `onlyEmpty`, an
    /// empty one): a symbolic link, a FIFO or anything else there is not the daemon's and is left
    /// alone, as ``openPart(_:mode:truncate:)`` leaves it (README: "nothing is touched").
    /// - Returns: whether a part was deleted.
    @discardableResult
    static func remove(_ path: String, onlyEmpty: Bool = false) -> Bool {
        var st = stat()
        guard lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG, !onlyEmpty || st.st_size == 0 else {
            return false
        }
        return unlink(path) == 0
    }

    /// Writes all of `count` bytes at `offset` of `fd` (`pwrite`, again after a short write or
    /// `EINTR`). Returns 0 or an errno.
    static func writeAll(_ fd: Int32, _ p: UnsafeRawPointer, _ count: Int, at offset: Int64) -> Int32 {
        var done = 0
        while done < count {
            let n = pwrite(fd, p + done, count - done, off_t(offset + Int64(done)))
            if n < 0 {
                if errno == EINTR { continue }
                return errno
            }
            done += n
        }
        return 0
    }

    /// The file's current size.
    public func size() -> Int64 {
        var st = stat()
        return fstat(fd, &st) == 0 ? Int64(st.st_size) : 0
    }

    /// Writes all of `count` bytes at the current end. Returns 0 or an errno.
    public func append(_ p: UnsafeRawPointer, _ count: Int, at offset: Int64) -> Int32 {
        let e = Self.writeAll(fd, p, count, at: offset)
        if e != 0 { return e }
        unflushed += count
        dirtyStart = min(dirtyStart, offset)
        dirtyEnd = max(dirtyEnd, offset + Int64(count))
        if unflushed >= Self.writeBehindBytes { startWriteback() }
        return 0
    }

    /// Starts writing the dirty pages back behind the writer, without waiting: the page cache
    /// never holds more than a few tens of MiB of this file unwritten, so the final
    /// `fdatasync` (and every checkpoint's) is short, and the pages stay cached for the digest.
    /// Only the span written since the last one: the whole file each time made every call walk
    /// the pages already written back (64 walks of a growing file for one gigabyte).
    private func startWriteback() {
        _ = aft_start_writeback(fd, dirtyStart, dirtyEnd - dirtyStart)
        unflushed = 0
        dirtyStart = Int64.max
        dirtyEnd = 0
    }

    /// Cuts the file to `length` bytes. Returns 0 or an errno.
    public func truncate(to length: Int64) -> Int32 {
        ftruncate(fd, off_t(length)) == 0 ? 0 : errno
    }

    /// Makes every byte written so far durable, off the loop; `done(true)` on success. A request
    /// made while a sync runs is served by the next sync, so its bytes are always covered.
    public func sync(_ done: @escaping (Bool) -> Void) {
        guard !closed else {
            done(false)
            return
        }
        waiters.append(done)
        if !inFlight { startSync() }
    }

    private func startSync() {
        inFlight = true
        let batch = waiters
        waiters = []
        let mode = self.mode
        self.mode = nil
        FileSync.fdatasync(loop: loop, fd: fd, mode: mode) { rc in
            self.inFlight = false
            if rc < 0 { self.lastSyncErrno = -rc }
            for w in batch { w(rc == 0) }
            if !self.waiters.isEmpty {
                self.startSync()
            } else if self.closeRequested {
                self.closeNow()
            }
        }
    }

    /// Whether a sync is running now.
    public var isSyncing: Bool { inFlight }

    /// Closes the descriptor once no sync is pending.
    public func close() {
        closeRequested = true
        if !inFlight && waiters.isEmpty { closeNow() }
    }

    private func closeNow() {
        guard !closed else { return }
        closed = true
        Glibc.close(fd)
    }
}

/// errno → TransferError, in one place.
public enum FileErrors {
    /// The SPEC error for a failed file operation.
    public static func error(_ e: Int32, _ what: String) -> TransferError {
        let text = String(cString: strerror(e))
        switch e {
        case ENOSPC, EDQUOT:
            // SPEC "Disk full": the job waits for space (JobMachine), spending no retry.
            return TransferError(.diskFull, "\(what): \(text)", retryable: true)
        case ENOENT, ENOTDIR: return TransferError(.destinationMissingDir, "\(what): \(text)", retryable: false)
        default: return TransferError(.io, "\(what): \(text)", retryable: false)
        }
    }
}
