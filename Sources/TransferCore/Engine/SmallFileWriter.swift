import CUV
import Foundation

/// Puts small finished downloads in place with shared cache flushes (group commit for files).
/// Each body held in memory (``DownloadTask/heldBodyLimit``) goes through two stages on libuv's
/// pool:
/// 1. **written**, at once and in parallel with the others: its part (``Item/part``) is created,
///    written and given the user's mode; the descriptor stays open;
/// 2. **settled**, with every part written since the last flush began: one flush at a time makes
///    them durable together — one `syncfs(2)` for the files of one file system (an `fdatasync`
///    for a file alone on its own) — then each is renamed into place (refused when the
///    destination exists, unless `replace`) and each directory renamed into is fsynced once.
///
/// So SPEC's order for every file is kept — its data durable before its rename, the rename
/// durable before the engine records the job completed (the caller does, on ``write(_:done:)``'s
/// answer) — while a file never waits for another's create and write: a `syncfs` covers what
/// was written before it started, so a file written while one runs joins the next, and waits
/// at most for one flush to end before its own starts. (The previous writer created, wrote and
/// synced up to 16 files in one work item, two at a time: a file waited for the creates of the
/// others, about 3.5 ms from the end of its body to its rename here, against ~1.5 ms now;
/// docs/benchmarks.md, seventh session.) `syncfs` writes back other dirty files of that file
/// system too (it never loses or reorders anyone's data); when it reports an error, each file of
/// the group gets its own `fdatasync`, so only a file whose data did not reach the disk fails.
///
/// Loop-thread only, but for the work items themselves, which touch only what they captured.
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
        /// Written and synced as the part, which stays: the move failed.
        case notMoved(TransferError)
    }

    /// A part written and still open, waiting for the next flush.
    struct Written: Sendable {
        var item: Item
        /// Its open descriptor (closed by ``settle(_:syncFileSystem:)``).
        var fd: Int32
    }

    /// The most parts one flush settles (each is an open descriptor until then; a download holds
    /// at most one, so there are never more than `--max-active`).
    static let maximumBatch = 64

    private let loop: EventLoop
    /// What makes a file system's dirty data durable (`syncfs`; tests pass a failing one).
    private let syncFileSystem: @Sendable (Int32) -> Int32
    /// Parts written, waiting for the next flush, with their callers' answers.
    private var written: [(part: Written, done: (Outcome) -> Void)] = []
    /// Whether a flush is on the pool (one at a time: two at once took no less time here, the
    /// disk's cache flushes being serial).
    private var settling = false
    /// Starts the next flush once the pass's finished writes are all in ``written`` (libuv hands
    /// back a pass's finished pool items one after another: the first alone would start a flush
    /// for itself while the others were ready a few microseconds later).
    private var settleWritten: LoopCheck!
    /// Flushes so far (for tests).
    private(set) var batches = 0

    /// Creates a writer on `loop`; `syncFileSystem(fd)` returns 0 or an errno (tests replace it).
    init(loop: EventLoop, syncFileSystem: @escaping @Sendable (Int32) -> Int32 = SmallFileWriter.syncfs) {
        self.loop = loop
        self.syncFileSystem = syncFileSystem
        settleWritten = LoopCheck(loop: loop) { [unowned self] in
            if !self.settling { self.startSettling() }
        }
    }

    /// Puts `item` in place; `done` gets its outcome on the loop thread.
    func write(_ item: Item, done: @escaping (Outcome) -> Void) {
        let box = Descriptor()
        WorkPool.run(loop, { Self.writePart(item, into: box) }) { e in
            guard e == 0 else { return done(.notWritten(e)) }
            self.written.append((Written(item: item, fd: box.fd), done))
            if !self.settling { self.settleWritten.arm() }
        }
    }

    /// Stops flushing (the daemon is stopping: what is not in place yet is recovered at the next
    /// start, from the finalizing row).
    func close() { settleWritten.close() }

    /// The descriptor a write hands to the loop (set on the pool, read in its answer).
    private final class Descriptor: @unchecked Sendable { var fd: Int32 = -1 }

    private final class Results: @unchecked Sendable {
        var outcomes: [Outcome] = []
        var unsyncedDirectories: [String] = []
    }

    private func startSettling() {
        let count = min(written.count, Self.maximumBatch)
        guard count > 0 else { return }
        let batch = Array(written.prefix(count))
        written.removeFirst(count)
        settling = true
        batches += 1
        let parts = batch.map(\.part)
        let results = Results()
        let sync = syncFileSystem
        WorkPool.run(
            loop,
            {
                (results.outcomes, results.unsyncedDirectories) = Self.settle(parts, syncFileSystem: sync)
                return 0
            }
        ) { _ in
            for directory in results.unsyncedDirectories {
                // The files are in place; a failed directory fsync only weakens power-loss
                // durability, which the log says.
                Log.info("cannot fsync \(directory) after a rename")
            }
            self.settling = false
            // Parts written meanwhile (and any the answers below add later) go with the next flush.
            self.settleWritten.arm()
            for (entry, outcome) in zip(batch, results.outcomes) { entry.done(outcome) }
        }
    }

    // MARK: - On the pool

    /// Creates `item`'s part (cut to nothing: a stale part of another download is never
    /// spliced), writes it and gives it the user's mode, leaving its descriptor in `box` (a pool
    /// thread). Returns 0, or an errno with nothing left of the part.
    private static func writePart(_ item: Item, into box: Descriptor) -> Int32 {
        let fd = open(item.part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, item.mode)
        guard fd >= 0 else { return errno }
        var e = item.bytes.withUnsafeBytes { buf in
            buf.isEmpty ? 0 : PartFile.writeAll(fd, buf.baseAddress!, buf.count, at: 0)
        }
        if e == 0 && fchmod(fd, item.mode) != 0 { e = errno }
        if e != 0 {
            Glibc.close(fd)
            unlink(item.part)
            return e
        }
        box.fd = fd
        return 0
    }

    /// Makes written parts durable, closes them and moves them into place (a pool thread).
    /// Returns each part's outcome and the directories whose fsync failed.
    static func settle(_ parts: [Written], syncFileSystem: (Int32) -> Int32) -> ([Outcome], [String]) {
        var outcomes = [Outcome?](repeating: nil, count: parts.count)
        var fds = parts.map(\.fd)
        func drop(_ i: Int, _ e: Int32) {
            if fds[i] >= 0 { Glibc.close(fds[i]) }
            fds[i] = -1
            unlink(parts[i].item.part)
            outcomes[i] = .notWritten(e)
        }
        // 1. Their data durable: one syncfs for the files of one file system, an fdatasync for a
        // file alone on its own; each file synced on its own when a syncfs reports an error.
        var byDevice: [dev_t: [Int]] = [:]
        for i in parts.indices {
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
        for i in parts.indices where fds[i] >= 0 {
            if Glibc.close(fds[i]) != 0 {
                let e = errno
                fds[i] = -1
                drop(i, e)
            }
            fds[i] = -1
        }
        // 2. Each moved into place; a refused move leaves the synced part (its bytes are the job's).
        var renamedInto: [String] = []
        for (i, part) in parts.enumerated() where outcomes[i] == nil {
            let item = part.item
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
        // 3. The renames durable: each directory once.
        let unsynced = renamedInto.filter { DirectorySyncer.fsyncDirectory($0) != 0 }
        return (outcomes.map { $0 ?? .notWritten(EIO) }, unsynced)
    }

    /// `syncfs(fd)`: 0 or an errno.
    @Sendable static func syncfs(_ fd: Int32) -> Int32 {
        aft_syncfs(fd) == 0 ? 0 : errno
    }
}
