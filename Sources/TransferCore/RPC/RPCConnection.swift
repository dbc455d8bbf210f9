import CUV
import Foundation

/// One client connection of the RPC server: line framing with the 1 MiB limit, writes, and the
/// event subscription. Owned by ``RPCServer`` (strongly) until closed; `handle.data` holds it
/// unretained, and the handle's memory is freed in its close callback. Loop-thread only.
public final class RPCConnection {
    /// The largest message accepted, in bytes.
    public static let maxMessageSize = 1 << 20
    /// A subscriber whose unread output exceeds this is dropped.
    static let maxQueuedOutput = 16 << 20

    let handle: UnsafeMutablePointer<uv_pipe_t>
    unowned let server: RPCServer
    private var buffer: [UInt8] = []
    private var scanned = 0
    private var discarding = false
    private(set) var closed = false
    /// Whether `events.subscribe` was called; `subscribedIds` nil means all jobs.
    public var subscribed = false
    public var subscribedIds: Set<Int64>?

    init(server: RPCServer, handle: UnsafeMutablePointer<uv_pipe_t>) {
        self.server = server
        self.handle = handle
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    func startReading() {
        let stream = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
        uv_read_start(stream, { _, suggested, buf in
            guard let buf else { return }
            buf.pointee.base = malloc(suggested)?.assumingMemoryBound(to: CChar.self)
            buf.pointee.len = buf.pointee.base == nil ? 0 : suggested
        }, { stream, nread, buf in
            defer { if let base = buf?.pointee.base { free(base) } }
            guard let stream, let data = stream.pointee.data else { return }
            let conn = Unmanaged<RPCConnection>.fromOpaque(data).takeUnretainedValue()
            if nread < 0 {
                conn.close()
            } else if nread > 0, let base = buf?.pointee.base {
                conn.received(UnsafeRawBufferPointer(start: base, count: nread))
            }
        })
    }

    private func received(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
        while !closed {
            guard let nl = buffer[scanned...].firstIndex(of: 0x0A) else {
                scanned = buffer.count
                if buffer.count > Self.maxMessageSize && !discarding {
                    discarding = true
                    sendError(id: .null, RPCError(code: RPCErrorCode.tooLarge, message: "message over 1 MiB"))
                }
                if discarding {
                    buffer.removeAll(keepingCapacity: false)
                    scanned = 0
                }
                return
            }
            let line = Array(buffer[..<nl])
            buffer.removeSubrange(...nl)
            scanned = 0
            if discarding {
                // The tail of an oversized message.
                discarding = false
                continue
            }
            if line.count > Self.maxMessageSize {
                sendError(id: .null, RPCError(code: RPCErrorCode.tooLarge, message: "message over 1 MiB"))
                continue
            }
            server.handleLine(line, from: self)
        }
    }

    /// Sends one JSON line.
    func send(_ data: Data) {
        guard !closed else { return }
        let stream = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
        if uv_stream_get_write_queue_size(stream) > Self.maxQueuedOutput {
            Log.info("dropping a client that does not read its events")
            close()
            return
        }
        let count = data.count + 1
        guard let mem = malloc(count) else { return }
        data.copyBytes(to: mem.assumingMemoryBound(to: UInt8.self), count: data.count)
        mem.storeBytes(of: 0x0A, toByteOffset: data.count, as: UInt8.self)
        let req = UnsafeMutablePointer<uv_write_t>.allocate(capacity: 1)
        var buf = uv_buf_init(mem.assumingMemoryBound(to: CChar.self), UInt32(count))
        // The buffer and request are freed in the write callback (the one place).
        let rc = uv_write(req, stream, &buf, 1) { req, _ in
            guard let req else { return }
            free(req.pointee.data)
            req.deallocate()
        }
        if rc < 0 {
            free(mem)
            req.deallocate()
            close()
            return
        }
        req.pointee.data = mem
    }

    func sendError(id: JSONValue, _ error: RPCError) {
        server.respond(self, id: id, result: nil, error: error)
    }

    /// Closes the connection; the server forgets it.
    public func close() {
        guard !closed else { return }
        closed = true
        closeAndFree(handle)
        server.forget(self)
    }
}
