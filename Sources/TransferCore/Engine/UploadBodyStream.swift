import Foundation

/// Reads an upload's payload into libcurl's buffer, segment by segment: inline bytes from
/// memory, file ranges with `pread`, so no more than one buffer of a file is ever in memory.
///
/// Each file is checked when it is opened (its size and mtime must be those the upload was
/// prepared with) and again after its last byte was read; a difference is `source_changed`.
/// Loop-thread only.
final class UploadBodyStream {
    /// The payload's pieces, in order.
    let segments: [MultipartFormData.Segment]
    /// The payload's length in bytes.
    let length: Int64
    /// Bytes handed out since the start (or the last ``rewind()``).
    private(set) var position: Int64 = 0
    /// Expected modification times of the files (seconds since 1970), by path.
    private let modificationTimes: [String: Double]
    private var index = 0
    private var offsetInSegment: Int64 = 0
    private var fd: Int32 = -1

    /// Creates a stream over `segments`.
    ///
    /// - Parameters:
    ///   - segments: Inline bytes and file ranges.
    ///   - modificationTimes: Files whose mtime must still be this (others are only checked for
    ///     their size and for changes while they are read).
    init(segments: [MultipartFormData.Segment], modificationTimes: [String: Double] = [:]) {
        self.segments = segments
        self.length = segments.reduce(0) { $0 + $1.length }
        self.modificationTimes = modificationTimes
    }

    deinit { closeFile() }

    /// Goes back to byte 0 (a new attempt, a redirect hop or a libcurl rewind).
    func rewind() {
        closeFile()
        index = 0
        offsetInSegment = 0
        position = 0
    }

    /// Goes to byte `start` of the payload (a resumable upload's append from the server's
    /// offset); the file there is opened, and checked, by the next read.
    func rewind(to start: Int64) {
        rewind()
        var left = max(0, min(start, length))
        while left > 0, index < segments.count {
            let take = min(left, segments[index].length)
            offsetInSegment = take
            position += take
            left -= take
            if left > 0 {
                index += 1
                offsetInSegment = 0
            }
        }
    }

    /// Closes the open file, if any.
    func close() { closeFile() }

    /// Fills up to `count` bytes of `buffer`.
    ///
    /// - Returns: The number of bytes written; 0 at the end of the payload.
    /// - Throws: `source_changed` if a file changed or shrank, `io` for a read error.
    func read(into buffer: UnsafeMutableRawPointer, count: Int) throws -> Int {
        var filled = 0
        while filled < count, index < segments.count {
            let remaining = segments[index].length - offsetInSegment
            if remaining == 0 {
                try endSegment()
                continue
            }
            let want = Int(min(Int64(count - filled), remaining))
            switch segments[index] {
            case .data(let d):
                let start = Int(offsetInSegment)
                d.withUnsafeBytes { raw in
                    if let base = raw.baseAddress { (buffer + filled).copyMemory(from: base + start, byteCount: want) }
                }
                advance(want)
                filled += want
            case .file(let path, let fileLength):
                if fd < 0 { try openFile(path, length: fileLength) }
                let n = pread(fd, buffer + filled, want, off_t(offsetInSegment))
                if n < 0 {
                    if errno == EINTR { continue }
                    throw FileErrors.error(errno, "cannot read \(path)")
                }
                if n == 0 {
                    throw TransferError(
                        .sourceChanged,
                        "\(path) became shorter while it was sent (\(offsetInSegment) of \(fileLength) bytes)",
                        retryable: false)
                }
                advance(n)
                filled += n
            }
        }
        if index < segments.count, segments[index].length == offsetInSegment { try endSegment() }
        return filled
    }

    private func advance(_ n: Int) {
        offsetInSegment += Int64(n)
        position += Int64(n)
    }

    /// Leaves the current segment; a file is checked once more for changes while it was read.
    private func endSegment() throws {
        if case .file(let path, let fileLength) = segments[index] {
            if fd < 0 { try openFile(path, length: fileLength) }  // an empty file is still checked
            try checkUnchanged(path, length: fileLength)
            closeFile()
        }
        index += 1
        offsetInSegment = 0
    }

    private func openFile(_ path: String, length: Int64) throws {
        let f = open(path, O_RDONLY | O_CLOEXEC)
        if f < 0 {
            let e = errno
            if e == ENOENT || e == ENOTDIR {
                throw TransferError(.sourceChanged, "\(path) no longer exists", retryable: false)
            }
            throw FileErrors.error(e, "cannot open \(path)")
        }
        fd = f
        _ = posix_fadvise(f, 0, 0, POSIX_FADV_SEQUENTIAL)
        try checkUnchanged(path, length: length)
    }

    private var openedModificationTime: Double?

    /// Compares the open file with what the upload expects: its size, its mtime at preparation
    /// and its mtime when it was opened.
    private func checkUnchanged(_ path: String, length: Int64) throws {
        var st = stat()
        guard fstat(fd, &st) == 0 else { throw FileErrors.error(errno, "cannot stat \(path)") }
        let mtime = UploadTask.modificationTime(st)
        if Int64(st.st_size) != length {
            throw TransferError(
                .sourceChanged, "\(path) changed: \(st.st_size) bytes, expected \(length)", retryable: false)
        }
        if let expected = modificationTimes[path] ?? openedModificationTime, expected != mtime {
            throw TransferError(.sourceChanged, "\(path) changed: it was modified", retryable: false)
        }
        openedModificationTime = mtime
    }

    private func closeFile() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
        openedModificationTime = nil
    }
}
