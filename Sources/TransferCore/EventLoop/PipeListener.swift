import CUV
import Foundation

/// A listening Unix socket (`uv_pipe_t`) that accepts connections from one uid only.
/// Loop-thread only.
///
/// `handle.data` holds the listener unretained; the owner keeps it alive until ``close()``. The
/// handle's memory is freed in its close callback (``closeAndFree(_:)``).
public final class PipeListener {
    /// The kernel's queue of connections not yet accepted: as long as the system allows, so that a
    /// burst of clients never sees `EAGAIN`.
    public static let backlog = SOMAXCONN

    private let loop: EventLoop
    private let handle: UnsafeMutablePointer<uv_pipe_t>
    private let allowedUID: uid_t
    private let onConnection: (PipeStream) -> Void
    private var closed = false

    /// Binds `path` (replacing only a stale socket: ``SocketPath/clear(_:)``), makes it 0600 and
    /// listens.
    /// - Parameters:
    ///   - loop: the loop.
    ///   - path: the socket path; its directory should be private already.
    ///   - allowedUID: the only peer uid served (SO_PEERCRED); others are closed at once.
    ///   - onConnection: receives each accepted connection; the receiver keeps it alive.
    /// - Throws: ``SocketPath/Refusal`` when something else is at `path`, ``UVError`` when the
    ///   socket cannot be bound or listened on.
    public convenience init(
        loop: EventLoop, path: String, allowedUID: uid_t = getuid(), onConnection: @escaping (PipeStream) -> Void
    ) throws {
        try self.init(loop: loop, what: path, allowedUID: allowedUID, onConnection: onConnection) { handle in
            try SocketPath.clear(path)
            try UVError.check(uv_pipe_bind(handle, path), "bind \(path)")
            chmod(path, 0o600)
        }
    }

    /// Listens on a socket that is already bound (and maybe listening): systemd socket activation
    /// hands one over as fd 3 (``SocketActivation``). Nothing is bound, nothing unlinked.
    /// - Parameters:
    ///   - loop: the loop.
    ///   - inheritedFD: the bound Unix stream socket.
    ///   - allowedUID: the only peer uid served (SO_PEERCRED); others are closed at once.
    ///   - onConnection: receives each accepted connection; the receiver keeps it alive.
    /// - Throws: ``UVError`` when the descriptor cannot be used.
    public convenience init(
        loop: EventLoop, inheritedFD fd: Int32, allowedUID: uid_t = getuid(),
        onConnection: @escaping (PipeStream) -> Void
    ) throws {
        try self.init(loop: loop, what: "fd \(fd)", allowedUID: allowedUID, onConnection: onConnection) { handle in
            try UVError.check(uv_pipe_open(handle, fd), "uv_pipe_open fd \(fd)")
        }
    }

    private init(
        loop: EventLoop, what: String, allowedUID: uid_t, onConnection: @escaping (PipeStream) -> Void,
        attach: (UnsafeMutablePointer<uv_pipe_t>) throws -> Void
    ) throws {
        self.loop = loop
        self.allowedUID = allowedUID
        self.onConnection = onConnection
        handle = UnsafeMutablePointer<uv_pipe_t>.allocate(capacity: 1)
        let rc = uv_pipe_init(loop.raw, handle, 0)
        if rc < 0 {
            handle.deallocate()
            throw UVError(rc, "uv_pipe_init")
        }
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        do {
            try attach(handle)
            let stream = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
            try UVError.check(
                uv_listen(stream, Self.backlog) { server, status in
                    guard let server, let data = server.pointee.data else { return }
                    let listener = Unmanaged<PipeListener>.fromOpaque(data).takeUnretainedValue()
                    if status < 0 {
                        Log.info("cannot accept a connection: \(UVError(status, "accept"))")
                        return
                    }
                    listener.acceptAll()
                }, "listen \(what)")
        } catch {
            closed = true
            closeAndFree(handle)
            throw error
        }
    }

    /// Accepts every pending connection, until `uv_accept` says `EAGAIN`.
    private func acceptAll() {
        let server = UnsafeMutableRawPointer(handle).assumingMemoryBound(to: uv_stream_t.self)
        while !closed {
            let client = UnsafeMutablePointer<uv_pipe_t>.allocate(capacity: 1)
            let initialized = uv_pipe_init(loop.raw, client, 0)
            if initialized < 0 {
                client.deallocate()
                Log.info("cannot accept a connection: \(UVError(initialized, "uv_pipe_init"))")
                return
            }
            let rc = uv_accept(server, UnsafeMutableRawPointer(client).assumingMemoryBound(to: uv_stream_t.self))
            if rc < 0 {
                closeAndFree(client)
                if rc != UV_EAGAIN.rawValue { Log.info("cannot accept a connection: \(UVError(rc, "uv_accept"))") }
                return
            }
            let connection = PipeStream(handle: client)
            guard let uid = connection.peerUID, uid == allowedUID else {
                Log.info("refused a connection from uid \(connection.peerUID.map(String.init) ?? "unknown")")
                connection.close()
                continue
            }
            onConnection(connection)
        }
    }

    /// Stops listening and frees the handle.
    public func close() {
        guard !closed else { return }
        closed = true
        closeAndFree(handle)
    }

    deinit { close() }
}
