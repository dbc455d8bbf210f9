import Foundation

/// Method names of the JSON-RPC API (`docs/rpc.md`).
public enum RPCMethod {
    public static let add = "transfer.add"
    public static let list = "transfer.list"
    public static let get = "transfer.get"
    public static let pause = "transfer.pause"
    public static let resume = "transfer.resume"
    public static let cancel = "transfer.cancel"
    public static let retry = "transfer.retry"
    public static let remove = "transfer.remove"
    public static let daemonStatus = "daemon.status"
    public static let daemonShutdown = "daemon.shutdown"
    public static let subscribe = "events.subscribe"
    /// Notification: a running job's progress (params: the job object).
    public static let progressEvent = "transfer.progress"
    /// Notification: a job changed state (params: the job object).
    public static let stateEvent = "transfer.state"
}

/// JSON-RPC error codes used by the daemon.
public enum RPCErrorCode {
    public static let parseError = -32700
    public static let invalidRequest = -32600
    public static let methodNotFound = -32601
    /// Bad params or refused input (the CLI exits 2). `data.code` holds the SPEC error code.
    public static let invalidParams = -32602
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
    public var code: Int
    public var message: String
    public var data: JSONValue?

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
    public var state: TransferState?
    public init(state: TransferState? = nil) { self.state = state }
}

/// Params of `transfer.get`.
public struct GetParams: Codable, Sendable {
    public var id: Int64
    public init(id: Int64) { self.id = id }
}

/// Params of the control methods (`transfer.pause|resume|cancel|retry|remove`).
public struct ControlParams: Codable, Sendable {
    public var ids: [Int64]
    /// `transfer.remove` only: also delete a completed download's file.
    public var deleteFiles: Bool?
    public init(ids: [Int64], deleteFiles: Bool? = nil) {
        self.ids = ids
        self.deleteFiles = deleteFiles
    }
}

/// One id a control method did not act on, and why.
public struct ControlRefusal: Codable, Sendable, Equatable {
    public var id: Int64
    /// The job's state, or null for an unknown id.
    public var state: TransferState?
    public var message: String
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
    public var jobs: [JobSnapshot]
    public var refused: [ControlRefusal]
    public init(jobs: [JobSnapshot], refused: [ControlRefusal]) {
        self.jobs = jobs
        self.refused = refused
    }
}

/// Params of `events.subscribe`: the ids to hear about, or all jobs when absent.
public struct SubscribeParams: Codable, Sendable {
    public var ids: [Int64]?
    public init(ids: [Int64]? = nil) { self.ids = ids }
}

/// Result of `daemon.status`.
public struct DaemonStatus: Codable, Sendable {
    public var pid: Int32
    public var version: String
    public var home: String
    public var socket: String
    /// `"reachable"` or `"unreachable"`.
    public var network: String
    public var maxActive: Int
    /// Number of jobs in each state.
    public var jobs: [String: Int]
    public var startedAt: String

    public init(
        pid: Int32, version: String, home: String, socket: String, network: String, maxActive: Int,
        jobs: [String: Int], startedAt: String
    ) {
        self.pid = pid
        self.version = version
        self.home = home
        self.socket = socket
        self.network = network
        self.maxActive = maxActive
        self.jobs = jobs
        self.startedAt = startedAt
    }
}

/// The product's version string.
public enum AFTransferVersion {
    public static let string = "0.1.0"
}
