/// One RPC method's handler (pueue's habit: one file per request kind, in `RPC/Handlers/`).
/// Loop-thread only.
public protocol RPCHandler {
    /// Whether the method may change jobs: the read it arrived in ends with a group commit before
    /// the answers are sent (the method's own rows were written already; a failing group commit
    /// is logged and retried, not turned into an error).
    var changesJobs: Bool { get }
    /// Answers one request. Anything thrown is mapped to a JSON-RPC error by the router
    /// (``RPCError/init(mapping:)``), the one place that knows the wire's error codes.
    func handle(_ request: RPCRequest) throws -> RPCReply
}

extension RPCHandler {
    /// Most methods only read.
    public var changesJobs: Bool { false }
}

/// One request as a handler sees it: its params, the connection it came on, and the daemon.
public struct RPCRequest {
    /// The params as sent (an object, an array, null, or absent).
    public var params: JSONValue?
    /// The connection (for subscriptions and batches).
    public var connection: RPCConnection
    /// The daemon's services.
    public var context: RPCContext

    /// Refuses params naming a member the method does not have (`-32602`, `invalid_request`,
    /// "unknown param NAME", the first in sorted order), as the CLI refuses an unknown option: a
    /// misspelt member must not change what a method does quietly (`"deletefiles": true` removing
    /// a job and leaving its file, `"final": false` under a misspelt `batch` queuing a part at once).
    /// - Parameter names: the method's members.
    public func refuseUnknownMembers(_ names: Set<String>) throws {
        guard case .object(let members)? = params else { return }
        if let name = members.keys.filter({ !names.contains($0) }).min() {
            throw RPCError.refusedInput(.invalidRequest, "unknown param \(name)")
        }
    }

    /// Decodes the params as `T` (absent params as `{}`), refusing a member `T` does not have.
    /// - Throws: ``RPCError`` as ``refuseUnknownMembers(_:)`` and ``decode(_:)`` do.
    public func decode<T: Decodable>(_ type: T.Type, members: Set<String>) throws -> T {
        try refuseUnknownMembers(members)
        return try decode(type)
    }

    /// Decodes the params as `T` (absent params as `{}`).
    /// - Throws: ``RPCError/invalidParams(_:)`` naming the field that does not fit.
    public func decode<T: Decodable>(_ type: T.Type) throws -> T {
        do {
            return try (params ?? .object([:])).decode(as: T.self)
        } catch {
            throw RPCError.invalidParams(Self.describe(error))
        }
    }

    /// What a decoding error says, as an `invalid params` message names it.
    static func describe(_ error: Error) -> String {
        switch error {
        case DecodingError.keyNotFound(let key, _): return "missing \(key.stringValue)"
        case DecodingError.typeMismatch(_, let ctx), DecodingError.valueNotFound(_, let ctx):
            return "wrong type for \(path(ctx.codingPath))"
        case DecodingError.dataCorrupted(let ctx):
            let path = path(ctx.codingPath)
            // A number out of range has no path here: say what is wrong instead.
            return path.isEmpty ? "bad value: \(ctx.debugDescription)" : "bad value for \(path)"
        default: return "\(error)"
        }
    }

    /// A coding path as JSON people write it: `ids[0]`, `headers[2]` (Foundation's own
    /// `stringValue` of an array's element is "Index 0").
    static func path(_ keys: [CodingKey]) -> String {
        keys.reduce(into: "") { text, key in
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : "." + key.stringValue
            }
        }
    }
}

/// What handlers share: the engine, the daemon's facts, the batches being assembled, and the way
/// to stop. Loop-thread only.
public final class RPCContext {
    /// The daemon's facts for `daemon.status`.
    public struct DaemonInfo: Sendable {
        /// The home directory.
        public var home: String
        /// The socket path.
        public var socket: String
        /// `--max-active`.
        public var maxActive: Int
        /// When the daemon started, RFC 3339 UTC.
        public var startedAt: String
        /// When the daemon started, seconds since 1970 (for `uptime`).
        public var startedAtSeconds: Double
        /// Creates the facts.
        public init(home: String, socket: String, maxActive: Int, startedAt: Double) {
            self.home = home
            self.socket = socket
            self.maxActive = maxActive
            self.startedAt = Timestamp.rfc3339(startedAt)
            self.startedAtSeconds = startedAt
        }
    }

    /// The transfer engine.
    public let service: JobService
    /// The daemon's facts.
    public let info: DaemonInfo
    /// `transfer.addMany` batches waiting for their final part.
    public let batches: BatchAssembler
    /// Asks the daemon to stop (after the current answers are sent).
    public let requestShutdown: () -> Void

    /// Creates the context.
    public init(
        service: JobService, info: DaemonInfo, batches: BatchAssembler? = nil,
        requestShutdown: @escaping () -> Void
    ) {
        self.service = service
        self.info = info
        self.batches =
            batches
            ?? BatchAssembler(discard: { [weak service] key in service?.discardStaged(batch: key.storeKey) })
        self.requestShutdown = requestShutdown
    }
}
