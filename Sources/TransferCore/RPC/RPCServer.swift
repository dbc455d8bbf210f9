import CUV
import Foundation

/// The JSON-RPC 2.0 server on the daemon's Unix socket: serves only peers with the daemon's uid,
/// one JSON object a line, never exits on bad input. Loop-thread only.
public final class RPCServer {
    /// Handles one request: method, params, and the connection (for subscriptions).
    public typealias Handler = (_ method: String, _ params: JSONValue?, _ connection: RPCConnection) -> Result<JSONValue, RPCError>

    private let loop: EventLoop
    private let listener: UnsafeMutablePointer<uv_pipe_t>
    private var connections: [ObjectIdentifier: RPCConnection] = [:]
    private let handler: Handler
    private let encoder: JSONEncoder = {
        let e = JSONEncoder()
        e.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return e
    }()
    private var closed = false

    /// Binds and listens on `path` (the caller made its directory private first).
    public init(loop: EventLoop, path: String, handler: @escaping Handler) throws {
        self.loop = loop
        self.handler = handler
        listener = UnsafeMutablePointer<uv_pipe_t>.allocate(capacity: 1)
        try UVError.check(uv_pipe_init(loop.raw, listener, 0), "uv_pipe_init")
        listener.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        unlink(path)
        do {
            try UVError.check(uv_pipe_bind(listener, path), "bind \(path)")
            chmod(path, 0o600)
            let stream = UnsafeMutableRawPointer(listener).assumingMemoryBound(to: uv_stream_t.self)
            try UVError.check(uv_listen(stream, 128) { server, status in
                guard status == 0, let server, let data = server.pointee.data else { return }
                Unmanaged<RPCServer>.fromOpaque(data).takeUnretainedValue().accept()
            }, "listen \(path)")
        } catch {
            closeAndFree(listener)
            throw error
        }
    }

    private func accept() {
        let client = UnsafeMutablePointer<uv_pipe_t>.allocate(capacity: 1)
        guard uv_pipe_init(loop.raw, client, 0) == 0 else {
            client.deallocate()
            return
        }
        let server = UnsafeMutableRawPointer(listener).assumingMemoryBound(to: uv_stream_t.self)
        let stream = UnsafeMutableRawPointer(client).assumingMemoryBound(to: uv_stream_t.self)
        guard uv_accept(server, stream) == 0 else {
            closeAndFree(client)
            return
        }
        let fd = aft_handle_fd(asHandle(client))
        let uid = aft_peer_uid(fd)
        guard uid >= 0, uid_t(uid) == getuid() else {
            Log.info("refused a connection from uid \(uid)")
            closeAndFree(client)
            return
        }
        let conn = RPCConnection(server: self, handle: client)
        connections[ObjectIdentifier(conn)] = conn
        conn.startReading()
    }

    func forget(_ conn: RPCConnection) {
        connections[ObjectIdentifier(conn)] = nil
    }

    /// Parses and answers one line.
    func handleLine(_ line: [UInt8], from conn: RPCConnection) {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
        let value: JSONValue
        do {
            value = try JSONDecoder().decode(JSONValue.self, from: Data(line))
        } catch {
            respond(conn, id: .null, result: nil, error: RPCError(code: RPCErrorCode.parseError, message: "parse error: not JSON"))
            return
        }
        guard case .object(let obj) = value else {
            respond(conn, id: .null, result: nil, error: RPCError(code: RPCErrorCode.invalidRequest, message: "a request must be a JSON object"))
            return
        }
        let id = obj["id"]
        if let id {
            switch id {
            case .string, .int, .null: break
            default:
                respond(conn, id: .null, result: nil, error: RPCError(code: RPCErrorCode.invalidRequest, message: "invalid id"))
                return
            }
        }
        guard obj["jsonrpc"] == .string("2.0"), case .string(let method)? = obj["method"] else {
            respond(conn, id: id ?? .null, result: nil,
                    error: RPCError(code: RPCErrorCode.invalidRequest, message: "not a JSON-RPC 2.0 request (jsonrpc \"2.0\" and a method are required)"))
            return
        }
        let params = obj["params"]
        if let params {
            switch params {
            case .object, .array, .null: break
            default:
                respond(conn, id: id ?? .null, result: nil, error: RPCError(code: RPCErrorCode.invalidParams, message: "params must be an object"))
                return
            }
        }
        let result = handler(method, params, conn)
        guard let id else { return }  // a notification: no answer
        switch result {
        case .success(let v): respond(conn, id: id, result: v, error: nil)
        case .failure(let e): respond(conn, id: id, result: nil, error: e)
        }
    }

    private struct Response: Encodable {
        let id: JSONValue
        let result: JSONValue?
        let error: RPCError?
        enum K: String, CodingKey { case jsonrpc, id, result, error }
        func encode(to encoder: Encoder) throws {
            var c = encoder.container(keyedBy: K.self)
            try c.encode("2.0", forKey: .jsonrpc)
            try c.encode(id, forKey: .id)
            if let error { try c.encode(error, forKey: .error) } else { try c.encode(result ?? .null, forKey: .result) }
        }
    }

    func respond(_ conn: RPCConnection, id: JSONValue, result: JSONValue?, error: RPCError?) {
        guard let data = try? encoder.encode(Response(id: id, result: result, error: error)) else { return }
        conn.send(data)
    }

    private struct Notification<P: Encodable>: Encodable {
        let jsonrpc = "2.0"
        let method: String
        let params: P
    }

    /// Sends a notification to every subscribed connection interested in the job.
    public func broadcast(_ method: String, job: JobSnapshot) {
        let targets = connections.values.filter { $0.subscribed && ($0.subscribedIds?.contains(job.id) ?? true) }
        guard !targets.isEmpty, let data = try? encoder.encode(Notification(method: method, params: job)) else { return }
        for c in targets { c.send(data) }
    }

    /// Stops accepting and closes every connection.
    public func close() {
        guard !closed else { return }
        closed = true
        closeAndFree(listener)
        for c in Array(connections.values) { c.close() }
    }
}
