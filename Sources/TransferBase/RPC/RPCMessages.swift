import Foundation

/// JSON-RPC error codes used by the daemon.
public enum RPCErrorCode {
    /// The line is not JSON.
    public static let parseError = -32700
    /// The JSON value is not a JSON-RPC 2.0 request object.
    public static let invalidRequest = -32600
    /// No such method.
    public static let methodNotFound = -32601
    /// Bad params or refused input (the CLI exits 2). `data.code` holds the SPEC error code;
    /// `data.index` the refused request of a `transfer.addMany`.
    public static let invalidParams = -32602
    /// Anything else that went wrong in the daemon (the CLI exits 1).
    public static let internalError = -32603
    /// No job with that id (the CLI exits 2).
    public static let notFound = -32001
    /// The command does not apply to the job in its state (the CLI exits 2).
    public static let refused = -32002
    /// A message over the 1 MiB limit.
    public static let tooLarge = -32003
    /// The daemon is shutting down.
    public static let shuttingDown = -32004
}

/// A JSON-RPC error object.
public struct RPCError: Error, Codable, Sendable, Equatable {
    /// One of ``RPCErrorCode``.
    public var code: Int
    /// A message for people.
    public var message: String
    /// Details: `{"code": "<SPEC error code>"}` for refused input, plus `"index"` in a batch.
    public var data: JSONValue?

    /// Creates an error object.
    public init(code: Int, message: String, data: JSONValue? = nil) {
        self.code = code
        self.message = message
        self.data = data
    }

    /// An `invalidParams` error carrying a SPEC error code (e.g. `destination_exists`) in `data.code`.
    public static func refusedInput(_ code: TransferErrorCode, _ message: String) -> RPCError {
        RPCError(code: RPCErrorCode.invalidParams, message: message, data: .object(["code": .string(code.rawValue)]))
    }
}

/// Params of `transfer.list`.
public struct ListParams: Codable, Sendable {
    /// Only jobs in this state; all jobs when absent.
    public var state: TransferState?
    /// At most this many jobs (the first ones in id order); all when absent.
    public var limit: Int?
    /// Creates the params.
    public init(state: TransferState? = nil, limit: Int? = nil) {
        self.state = state
        self.limit = limit
    }
}

/// Params of `transfer.get` and `transfer.curl`.
public struct GetParams: Codable, Sendable {
    /// The job's id.
    public var id: Int64
    /// Creates the params.
    public init(id: Int64) { self.id = id }
}

/// Params of `transfer.setUrl`.
public struct SetUrlParams: Codable, Sendable {
    /// The job's id.
    public var id: Int64
    /// The new URL (validated as for `transfer.add`).
    public var url: String
    /// Creates the params.
    public init(id: Int64, url: String) {
        self.id = id
        self.url = url
    }
}

/// Result of `transfer.curl`.
public struct CurlResult: Codable, Sendable, Equatable {
    /// The equivalent curl command, secrets shown as `***`.
    public var command: String
    /// Creates the result.
    public init(command: String) { self.command = command }
}

/// Params of `transfer.addMany` (SPEC "Scale"): all requests in one message, or one part of a
/// batch (`batch` set) sent on one connection, the last with `final` true.
public struct AddManyParams: Codable, Sendable {
    /// The requests (`transfer.add` params each), in order.
    public var requests: [TransferRequest]
    /// The batch this part belongs to; absent for a list sent in one message.
    public var batch: String?
    /// Whether this is the batch's last part (required with `batch`).
    public var final: Bool?
    /// Creates the params.
    public init(requests: [TransferRequest], batch: String? = nil, final: Bool? = nil) {
        self.requests = requests
        self.batch = batch
        self.final = final
    }
}

/// Result of a `transfer.addMany` part that is not the last: the batch and how many of its
/// requests the daemon holds so far.
public struct AddManyPartResult: Codable, Sendable, Equatable {
    /// The batch id, as sent.
    public var batch: String
    /// Requests received so far in this batch, all parts together.
    public var received: Int
    /// Creates the result.
    public init(batch: String, received: Int) {
        self.batch = batch
        self.received = received
    }
}

/// Result of `transfer.addMany` (single message, or a batch's final part): the new jobs, in request
/// order.
public struct AddManyResult: Codable, Sendable {
    /// The job objects, in request order.
    public var jobs: [JobSnapshot]
    /// Creates the result.
    public init(jobs: [JobSnapshot]) { self.jobs = jobs }
}

/// Params of the control methods (`transfer.pause|resume|cancel|retry|remove`).
public struct ControlParams: Codable, Sendable {
    /// The jobs to act on.
    public var ids: [Int64]
    /// `transfer.remove` only: also delete a completed download's file.
    public var deleteFiles: Bool?
    /// Creates the params.
    public init(ids: [Int64], deleteFiles: Bool? = nil) {
        self.ids = ids
        self.deleteFiles = deleteFiles
    }
}

/// One id a control method did not act on, and why.
public struct ControlRefusal: Codable, Sendable, Equatable {
    /// The job's id.
    public var id: Int64
    /// The job's state, or null for an unknown id.
    public var state: TransferState?
    /// Why the job was not acted on, naming the job and its state.
    public var message: String
    /// Creates a refusal.
    public init(id: Int64, state: TransferState?, message: String) {
        self.id = id
        self.state = state
        self.message = message
    }

    enum CodingKeys: String, CodingKey { case id, state, message }

    /// Encodes `state` as null for an unknown id (never omitted).
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(id, forKey: .id)
        try c.encode(state, forKey: .state)
        try c.encode(message, forKey: .message)
    }
}

/// Result of the control methods: the jobs acted on (their new objects) and the refusals.
/// A removed job appears in `jobs` with its last state.
public struct ControlResult: Codable, Sendable {
    /// The jobs acted on: their objects after the change (for `remove`, the last object).
    public var jobs: [JobSnapshot]
    /// The ids not acted on, and why.
    public var refused: [ControlRefusal]
    /// Creates the result.
    public init(jobs: [JobSnapshot], refused: [ControlRefusal]) {
        self.jobs = jobs
        self.refused = refused
    }
}

/// Params of `events.subscribe`: the ids to hear about, or all jobs when absent; and whether to
/// hear of new jobs.
public struct SubscribeParams: Codable, Sendable {
    /// The jobs to hear about; all jobs when absent.
    public var ids: [Int64]?
    /// Whether each new job's `transfer.state` (state `queued`) is sent; true when absent. A
    /// client that queues jobs and follows them has them from the answer already.
    public var added: Bool?
    /// Creates the params.
    public init(ids: [Int64]? = nil, added: Bool? = nil) {
        self.ids = ids
        self.added = added
    }
}

/// Result of `daemon.status`.
public struct DaemonStatus: Codable, Sendable {
    /// The daemon's process id.
    public var pid: Int32
    /// The daemon's version (``AFTransferVersion``).
    public var version: String
    /// Seconds since the daemon started.
    public var uptime: Double
    /// The home directory.
    public var home: String
    /// The socket path.
    public var socket: String
    /// `"reachable"` or `"unreachable"`.
    public var network: String
    /// The daemon-wide bandwidth limits in force now (as `limit --json`).
    public var limits: LimitsInForce
    /// Number of jobs in each state (every state present).
    public var jobs: [String: Int]
    /// Transfers running now.
    public var active: Int
    /// Bytes per second, all running transfers together.
    public var rate: Double
    /// At most this many transfers at once (`--max-active`).
    public var maxActive: Int
    /// When the daemon started, RFC 3339 UTC.
    public var startedAt: String

    /// Creates the result.
    public init(
        pid: Int32, version: String, uptime: Double, home: String, socket: String, network: String,
        limits: LimitsInForce, jobs: [String: Int], active: Int, rate: Double, maxActive: Int, startedAt: String
    ) {
        self.pid = pid
        self.version = version
        self.uptime = uptime
        self.home = home
        self.socket = socket
        self.network = network
        self.limits = limits
        self.jobs = jobs
        self.active = active
        self.rate = rate
        self.maxActive = maxActive
        self.startedAt = startedAt
    }
}

/// The product's version string.
public enum AFTransferVersion {
    /// The version, `MAJOR.MINOR.PATCH`.
    public static let string = "0.1.0"
}
