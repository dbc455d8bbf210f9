import CUV
import Foundation

/// A connected Unix stream socket (`uv_pipe_t`): reads handed to a callback, writes queued in
/// order with an optional completion, and close. Loop-thread only.
///
/// `handle.data` holds the stream unretained; the owner keeps the stream alive while it is open.
/// The handle's memory is freed in its close callback (``closeAndFree(_:)``); each write's buffer
/// and request in the write callback (``PipeStream/writeDone``), the one place for both.
public final class PipeStream {
    /// The suggested size of one read.
    static let readSize = 64 * 1024

    private let handle: UnsafeMutablePointer<uv_pipe_t>
    /// Receives the bytes of each read.
    public var onRead: ((UnsafeRawBufferPointer) -> Void)?
    /// Called once when the peer closes the connection or a read fails (the stream is closed then).
    public var onEnd: (() -> Void)?
    /// When set, called instead of ``onEnd`` when the peer has only closed its sending side
    /// (end of file, `shutdown(SHUT_WR)`): reading stops, the stream stays open for writing.
    public var onEndOfInput: (() -> Void)?
    /// Whether ``close()`` was called.
    public private(set) var isClosed = false

    /// Takes over an initialized and accepted pipe handle.
    init(handle: UnsafeMutablePointer<uv_pipe_t>) {
        self.handle = handle
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    private var stream: UnsafeMutablePointer<uv_stream_t> {
        UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
    }

    /// The uid of the process at the other end, or nil when the kernel does not say.
    public var peerUID: uid_t? {
        SocketPeer.uid(aft_handle_fd(asHandle(handle)))
    }

    /// Bytes handed to ``write(_:completion:)`` that the kernel has not taken yet.
    public var writeQueueSize: Int { isClosed ? 0 : uv_stream_get_write_queue_size(stream) }

    /// Whether reads are being delivered (between ``startReading()`` and ``stopReading()``).
    public private(set) var isReading = false

    /// Stops delivering reads until ``startReading()``: the kernel's buffer fills and the peer's
    /// writes wait (backpressure). A closed stream is left as it is.
    public func stopReading() {
        guard !isClosed, isReading else { return }
        isReading = false
        uv_read_stop(stream)
    }

    /// Starts delivering reads to ``onRead`` (again, after ``stopReading()``).
    public func startReading() {
        guard !isClosed, !isReading else { return }
        isReading = true
        let rc = uv_read_start(
            stream,
            { _, suggested, buf in
                guard let buf else { return }
                let size = min(suggested, PipeStream.readSize)
                buf.pointee.base = malloc(size)?.assumingMemoryBound(to: CChar.self)
                buf.pointee.len = buf.pointee.base == nil ? 0 : size
            },
            { stream, nread, buf in
                // The read buffer is freed here, the one place.
                defer { if let base = buf?.pointee.base { free(base) } }
                guard let stream, let data = stream.pointee.data else { return }
                let pipe = Unmanaged<PipeStream>.fromOpaque(data).takeUnretainedValue()
                if nread == Int(UV_EOF.rawValue), let endOfInput = pipe.onEndOfInput {
                    pipe.stopReading()
                    endOfInput()
                } else if nread < 0 {
                    pipe.ended()
                } else if nread > 0, let base = buf?.pointee.base {
                    pipe.onRead?(UnsafeRawBufferPointer(start: base, count: nread))
                }
            })
        if rc < 0 { ended() }
    }

    private func ended() {
        guard !isClosed else { return }
        close()
        onEnd?()
    }

    /// What a write's completion is told: whether the bytes reached the kernel.
    public typealias WriteCompletion = (Bool) -> Void

    /// The state of one write, retained in `uv_write_t.data` until the write callback.
    private final class PendingWrite {
        let buffer: UnsafeMutableRawPointer
        let completion: WriteCompletion?
        init(buffer: UnsafeMutableRawPointer, completion: WriteCompletion?) {
            self.buffer = buffer
            self.completion = completion
        }
    }

    /// Queues `bytes` for writing after every earlier write. `completion` runs on the loop thread
    /// when the kernel has them (true) or the write failed or was cancelled by ``close()`` (false).
    public func write(_ bytes: [UInt8], completion: WriteCompletion? = nil) {
        guard !isClosed, !bytes.isEmpty, let memory = malloc(bytes.count) else {
            completion?(false)
            return
        }
        bytes.withUnsafeBytes { if let base = $0.baseAddress { memory.copyMemory(from: base, byteCount: $0.count) } }
        let request = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        request.pointee.data = Unmanaged.passRetained(PendingWrite(buffer: memory, completion: completion)).toOpaque()
        var buf = uv_buf_init(memory.assumingMemoryBound(to: CChar.self), UInt32(bytes.count))
        let rc = uv_write(request, stream, &buf, 1) { request, status in
            guard let request else { return }
            PipeStream.writeDone(request, ok: status == 0)
        }
        if rc < 0 {
            Self.writeDone(request, ok: false)
            close()
        }
    }

    /// Frees a write's buffer and request and runs its completion: the one place they are released.
    private static func writeDone(_ request: UnsafeMutablePointer<uv_write_t>, ok: Bool) {
        guard let data = request.pointee.data else { return }
        let write = Unmanaged<PendingWrite>.fromOpaque(data).takeRetainedValue()
        free(write.buffer)
        request.deallocate()
        write.completion?(ok)
    }

    /// Closes the connection; pending writes complete with false.
    public func close() {
        guard !isClosed else { return }
        isClosed = true
        closeAndFree(handle)
    }

    deinit { close() }
}
