import CUV
import Foundation

/// Puts small finished downloads in place in batches (group commit for files): the bodies held in
/// memory (``DownloadTask/heldBodyLimit``) that finish while ``maximumRunning`` batches are on the
/// pool wait for the next one, those one commit lets go start together (``gathering(_:)``), and a
/// batch is one work item that
/// 1. creates, writes and closes each part (``Item/part``) with the user's mode, unless its
///    destination exists and may not be replaced (then the part is not touched);
/// 2. makes them all durable at once: one `syncfs(2)` for the files of one file system (one
///    `fdatasync` for a file alone on its file system);
/// 3. renames each into place (refused when the destination exists, unless `replace`);
/// 4. fsyncs each directory it renamed into, once.
///
/// So SPEC's order for every file is kept — its data durable before its rename, the rename
/// durable before the engine records the job completed (the caller does, on ``write(_:done:)``'s
/// answer) — while 2,000 small files cost about a thousand cache flushes instead of four thousand.
/// Measured here (ext4 on a virtio disk, docs/benchmarks.md): in C, 2,000 files of 16 KiB in
/// batches of 16 took 0.11 s of kernel time against 0.24–0.36 s with an `fdatasync` each; in the
/// daemon, 0.31–0.36 ms of CPU a job against 0.39–0.45. `syncfs` writes back other dirty files of
/// that file system too (it never loses or reorders anyone's data); when it reports an error, each
/// file of the group gets its own `fdatasync`, so only a file whose data did not reach the disk
/// fails.
///
/// Loop-thread only, but for the work item itself, which touches only what it captured.
final class SmallFileWriter {
    /// One finished body to put in place.
    struct Item: Sendable {
        /// The whole body.
        var bytes: [UInt8]
        /// The part file to write it to (created or cut to nothing).
        var part: String
        /// The destination it is renamed to.
        var path: String
        /// The mode the part gets (the daemon's umask is 077).
        var mode: mode_t
        /// Whether an existing destination is replaced (`--replace`).
        var replace: Bool
    }

    /// What became of an item.
    enum Outcome: Sendable, Equatable {
        /// Written, synced and in place (the directory synced too, or its failure logged).
        case inPlace
        /// Not written (the errno): nothing is left of the part.
        case notWritten(Int32)
        /// Not written because the destination exists and may not be replaced, or because the
        /// part's name holds something that is not a regular file (a link, a FIFO): that was not
        /// touched.
        case refused(TransferError)
        /// Written and synced as the part, which stays: the move failed.
        case notMoved(TransferError)
    }

    /// The most files one batch holds (each is an open descriptor while it is written). Eight
    /// rather than sixteen: a smaller batch is in place sooner, and the bodies it leaves start the
    /// next batch (2,000 × 16 KiB with 16 slots, 22 interleaved pairs: 3 % less wall, 16 of 22
    /// pairs faster; four was no better; docs/benchmarks.md, nineteenth session).
    static let maximumBatch = 8
    /// The most batches on the pool at once: a body that finishes while one runs need not wait
    /// for it (each waits about a millisecond for its two cache flushes here).
    static let maximumRunning = 2

    private let loop: EventLoop
    /// What makes a file system's dirty data durable (`syncfs`; tests pass a failing one).
    private let syncFileSystem: @Sendable (Int32) -> Int32
    private var waiting: [(item: Item, done: (Outcome) -> Void)] = []
    /// Inside ``gathering(_:)``: files wait for its end.
    private var isGathering = false
    /// Batches on the pool now.
    private var running = 0
    /// Batches written so far (for tests).
    private(set) var batches = 0

    /// Creates a writer on `loop`; `syncFileSystem(fd)` returns 0 or an errno (tests replace it).
    init(loop: EventLoop, syncFileSystem: @escaping @Sendable (Int32) -> Int32 = SmallFileWriter.syncfs) {
        self.loop = loop
        self.syncFileSystem = syncFileSystem
    }

    /// Puts `item` in place with the next batch; `done` gets its outcome on the loop thread.
    func write(_ item: Item, done: @escaping (Outcome) -> Void) {
        waiting.append((item, done))
        if !isGathering && running < Self.maximumRunning { startBatch() }
    }

    /// Runs `body`, then starts the files it wrote together: no batch starts inside it. The
    /// engine wraps what waited for a commit in it — the bodies one commit recorded finalizing
    /// are written one after the other, and without it the first went alone onto a free lane
    /// and the rest waited for a lane (2,000 × 16 KiB: 180 of 422 batches held one file;
    /// gathered, 256 batches, 244 of them full; docs/benchmarks.md, twenty-third session).
    func gathering(_ body: () -> Void) {
        guard !isGathering else { return body() }
        isGathering = true
        body()
        isGathering = false
        while running < Self.maximumRunning && !waiting.isEmpty { startBatch() }
    }

    private final class Results: @unchecked Sendable {
        var outcomes: [Outcome] = []
        var unsyncedDirectories: [String] = []
    }

    private func startBatch() {
        let count = min(waiting.count, Self.maximumBatch)
        guard count > 0 else { return }
        let batch = Array(waiting.prefix(count))
        waiting.removeFirst(count)
        running += 1
        batches += 1
        let items = batch.map(\.item)
        let results = Results()
        let sync = syncFileSystem
        WorkPool.run(
            loop,
            {
                (results.outcomes, results.unsyncedDirectories) = Self.writeBatch(items, syncFileSystem: sync)
                return 0
            }
        ) { _ in
            for directory in results.unsyncedDirectories {
                // The files are in place; a failed directory fsync only weakens power-loss
                // durability, which the log says.
                Log.info("cannot fsync \(directory) after a rename")
            }
            // Bodies that finish while these are reported join the next batch.
            for (entry, outcome) in zip(batch, results.outcomes) { entry.done(outcome) }
            self.running -= 1
            self.startBatch()
        }
    }

    // MARK: - On the pool

    /// Writes, syncs and moves a batch (a pool thread). Returns each item's outcome and the
    /// directories whose fsync failed.
    static func writeBatch(_ items: [Item], syncFileSystem: (Int32) -> Int32) -> ([Outcome], [String]) {
        var outcomes = [Outcome?](repeating: nil, count: items.count)
        var fds = [Int32](repeating: -1, count: items.count)
        func drop(_ i: Int, _ e: Int32) {
            if fds[i] >= 0 { Glibc.close(fds[i]) }
            fds[i] = -1
            unlink(items[i].part)
            outcomes[i] = .notWritten(e)
        }
        // 1. Each part created (cut to nothing: a stale part of another download is never
        // spliced), written and given the user's mode.
        for (i, item) in items.enumerated() {
            // The rename below refuses an existing destination too; looked for first, a clash
            // leaves no part behind.
            if let clash = Destination(path: item.path).clash(replace: item.replace, heldBy: nil) {
                outcomes[i] = .refused(clash)
                continue
            }
            let fd: Int32
            switch PartFile.openPart(item.part, mode: item.mode, truncate: true) {
            case .success(let opened):
                fd = opened
            case .failure(.errno(let e)):
                outcomes[i] = .notWritten(e)
                continue
            case .failure(.notAFile(let error)):
                outcomes[i] = .refused(error)  // nothing written; the job fails with it
                continue
            }
            fds[i] = fd
            var e = item.bytes.withUnsafeBytes { buf in
                buf.isEmpty ? 0 : PartFile.writeAll(fd, buf.baseAddress!, buf.count, at: 0)
            }
            if e == 0 && fchmod(fd, item.mode) != 0 { e = errno }
            if e != 0 { drop(i, e) }
        }
        // 2. Their data durable: one syncfs for the files of one file system, an fdatasync for a
        // file alone on its own; each file synced on its own when a syncfs reports an error.
        var byDevice: [dev_t: [Int]] = [:]
        for i in items.indices where fds[i] >= 0 {
            var st = stat()
            guard fstat(fds[i], &st) == 0 else {
                drop(i, errno)
                continue
            }
            byDevice[st.st_dev, default: []].append(i)
        }
        for group in byDevice.values {
            if group.count > 1, syncFileSystem(fds[group[0]]) == 0 { continue }
            for i in group where fdatasync(fds[i]) != 0 { drop(i, errno) }
        }
        for i in items.indices where fds[i] >= 0 {
            if Glibc.close(fds[i]) != 0 {
                let e = errno
                fds[i] = -1
                drop(i, e)
            }
            fds[i] = -1
        }
        // 3. Each moved into place; a refused move leaves the synced part (its bytes are the job's).
        var renamedInto: [String] = []
        for (i, item) in items.enumerated() where outcomes[i] == nil {
            let rc = item.replace ? Glibc.rename(item.part, item.path) : aft_rename_noreplace(item.part, item.path)
            if rc != 0 {
                let e = errno
                let error = Destination.moveError(
                    e, part: item.part, to: item.path, in: Destination.directory(of: item.path))
                outcomes[i] = .notMoved(error ?? FileErrors.error(e, "cannot move \(item.part) into \(item.path)"))
                continue
            }
            outcomes[i] = .inPlace
            let directory = Destination.directory(of: item.path)
            if !renamedInto.contains(directory) { renamedInto.append(directory) }
        }
        // 4. The renames durable: each directory once.
        let unsynced = renamedInto.filter { DirectorySyncer.fsyncDirectory($0) != 0 }
        return (outcomes.map { $0 ?? .notWritten(EIO) }, unsynced)
    }

    /// `syncfs(fd)`: 0 or an errno.
    @Sendable static func syncfs(_ fd: Int32) -> Int32 {
        aft_syncfs(fd) == 0 ? 0 : errno
    }
}
