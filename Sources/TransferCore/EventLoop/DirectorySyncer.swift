import Foundation

/// fsyncs directories after renames into them, coalesced (group commit): called on a pool thread
/// right after its rename, ``syncAfterRename(_:)`` returns once an fsync of the directory that
/// started after that rename has finished. One fsync covers every rename made into the directory
/// before it started; a thread whose rename came in while one ran waits for it, then runs the next
/// one unless another thread already does. So a burst of small files into one directory costs a
/// few directory fsyncs, not one each, and the rename and its fsync are one work item (one trip
/// through the pool and back to the loop, not two).
public final class DirectorySyncer: @unchecked Sendable {
    /// One directory's renames and fsyncs (guarded by `condition`).
    private struct Directory {
        /// Renames made into it so far (a thread's rename is its ticket).
        var renames: UInt64 = 0
        /// Renames covered by the last fsync that finished.
        var synced: UInt64 = 0
        /// The result of that fsync (0 or an errno).
        var result: Int32 = 0
        var syncing = false
        /// Threads waiting for an fsync (the entry is kept while any does).
        var waiting = 0
    }

    /// The loop the syncer reports on.
    let loop: EventLoop
    /// What fsyncs a directory (``fsyncDirectory(_:)``; replaceable for tests).
    private let fsyncer: @Sendable (String) -> Int32
    private let condition = NSCondition()
    private var directories: [String: Directory] = [:]
    private var fsyncs = 0

    /// Creates a syncer on `loop`; `fsyncer` does the fsync (tests pass a slow or failing one).
    public init(loop: EventLoop, fsyncer: @escaping @Sendable (String) -> Int32 = DirectorySyncer.fsyncDirectory) {
        self.loop = loop
        self.fsyncer = fsyncer
    }

    /// How many directory fsyncs ran (for tests and the log).
    public var syncCount: Int {
        condition.lock()
        defer { condition.unlock() }
        return fsyncs
    }

    /// On a pool thread, after a rename into `directory`: makes that rename durable, sharing the
    /// fsync with the renames around it. Returns 0 or the errno of the fsync that covered it.
    public func syncAfterRename(_ directory: String) -> Int32 {
        condition.lock()
        defer { condition.unlock() }
        directories[directory, default: Directory()].renames += 1
        let ticket = directories[directory]!.renames
        while true {
            let d = directories[directory]!
            if d.synced >= ticket {
                forgetIfIdle(directory)
                return d.result
            }
            if !d.syncing {
                directories[directory]!.syncing = true
                let target = d.renames  // every rename made so far, this one among them
                fsyncs += 1
                condition.unlock()
                let rc = fsyncer(directory)
                condition.lock()
                directories[directory]!.syncing = false
                directories[directory]!.synced = target
                directories[directory]!.result = rc
                condition.broadcast()
                forgetIfIdle(directory)
                return rc
            }
            directories[directory]!.waiting += 1
            condition.wait()
            directories[directory]!.waiting -= 1
        }
    }

    /// Drops a directory's entry once nothing is pending or waiting on it (under the lock).
    private func forgetIfIdle(_ directory: String) {
        guard let d = directories[directory], !d.syncing, d.waiting == 0, d.synced == d.renames else { return }
        directories[directory] = nil
    }

    /// fsyncs a directory now, on the calling thread. Returns 0 or an errno.
    public static func fsyncDirectory(_ path: String) -> Int32 {
        let fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { return errno }
        defer { close(fd) }
        return fsync(fd) == 0 ? 0 : errno
    }
}
