import Foundation

/// SHA-256 of a file that grows in order (a download's part). The first ``inlineBytes`` are
/// hashed on the loop from the buffer just written (``wrote(_:at:)``), so a small file needs no
/// read-back; the rest is computed on libuv's thread pool so the loop never spends long hashing:
/// ranges are read back from the page cache through a read-only descriptor, one work item at a
/// time, in order. Loop-thread only.
final class RangeHasher {
    /// Unhashed bytes that make it worth queuing a work item.
    static let batchBytes: Int64 = 4 << 20
    /// Bytes of the file hashed from memory as they are written. A pool read costs a hand-off to
    /// another thread and back and an open, read and close (more than hashing 16 KiB); past a
    /// MiB, hashing on the pool keeps a large download's digest off the loop.
    static let inlineBytes: Int64 = 1 << 20

    private let loop: EventLoop
    private let digest = Sha256()
    private let path: String
    /// The read-only descriptor, opened for the first read back (-1 until then).
    private var fd: Int32 = -1
    /// Bytes fed to the digest so far.
    private(set) var hashedTo: Int64 = 0
    /// The end of the file as known to the writer.
    private var knownEnd: Int64 = 0
    private var inFlight = false
    private var failed = false
    private var closed = false
    private var waiters: [(end: Int64, done: (Bool) -> Void)] = []

    /// A hasher of the file at `path`, which is opened for reading when bytes must be read back;
    /// a failure to open it then shows as a failed digest. With `openingNow` (an upload's
    /// source, which exists), it is opened at once: the file read back is the one being sent,
    /// even if it is deleted or moved away meanwhile.
    init(loop: EventLoop, path: String, openingNow: Bool = false) {
        self.loop = loop
        self.path = path
        if openingNow { fd = open(path, O_RDONLY | O_CLOEXEC) }
    }

    deinit { if fd >= 0 { Glibc.close(fd) } }

    /// The writer wrote `data` at `offset`: hashed now, from memory, when it continues the digest
    /// and ends within ``inlineBytes``; otherwise read back later (``advance(to:)``).
    func wrote(_ data: UnsafeRawBufferPointer, at offset: Int64) {
        let end = offset + Int64(data.count)
        if !inFlight, !failed, !closed, offset == hashedTo, end <= Self.inlineBytes, let base = data.baseAddress {
            digest.update(base, data.count)
            hashedTo = end
        }
        advance(to: end)
    }

    /// The writer has written up to `end`; hashes in the background once enough has piled up.
    func advance(to end: Int64) {
        knownEnd = max(knownEnd, end)
        if knownEnd - hashedTo >= Self.batchBytes { pump() }
    }

    /// Calls `done(true)` once every byte before `end` is hashed (false if reading failed).
    func whenHashed(upTo end: Int64, _ done: @escaping (Bool) -> Void) {
        knownEnd = max(knownEnd, end)
        if failed {
            done(false)
            return
        }
        if hashedTo >= end {
            done(true)
            return
        }
        waiters.append((end, done))
        pump()
    }

    /// The hex digest of everything before `end`, or nil if the bytes could not be read back.
    func finish(at end: Int64, _ done: @escaping (String?) -> Void) {
        whenHashed(upTo: end) { ok in done(ok && self.hashedTo == end ? self.digest.finalizeHex() : nil) }
    }

    /// Stops hashing; a work item under way finishes on its own.
    func close() {
        closed = true
        waiters = []
    }

    private func pump() {
        guard !inFlight, !closed, !failed, knownEnd > hashedTo else { return }
        if fd < 0 {
            fd = open(path, O_RDONLY | O_CLOEXEC)
            if fd < 0 {
                failed = true
                releaseWaiters()
                return
            }
        }
        inFlight = true
        let start = hashedTo
        let end = knownEnd
        digest.update(loop: loop, fd: fd, from: start, to: end) { ok in
            self.inFlight = false
            if ok { self.hashedTo = end } else { self.failed = true }
            self.releaseWaiters()
            if !self.waiters.isEmpty || self.knownEnd - self.hashedTo >= Self.batchBytes { self.pump() }
        }
    }

    /// Tells the waiters whose bytes are hashed (all of them, with false, once reading failed).
    private func releaseWaiters() {
        let ready = waiters.filter { failed || $0.end <= hashedTo }
        waiters.removeAll { failed || $0.end <= hashedTo }
        for w in ready { w.done(!failed) }
    }
}
