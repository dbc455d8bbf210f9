/// The one place where errors become JSON-RPC error objects (`docs/rpc.md`, "Errors").
extension RPCError {
    /// The wire error for anything a handler or the ``JobService`` threw: an ``RPCError`` as it
    /// is; a ``TransferError`` as refused input (-32602, `data.code`); a ``BatchRefusal`` as
    /// refused input naming the request (`data.index`); a ``JobRefusal`` as -32002; ``EngineStopping`` as -32004; anything else as an internal error (-32603).
    public init(mapping error: Error) {
        switch error {
        case let error as RPCError:
            self = error
        case let error as TransferError:
            self = .refusedInput(error.code, error.message)
        case let refusal as BatchRefusal:
            self = .batchRefusal(refusal)
        case let refusal as JobRefusal:
            self = RPCError(code: RPCErrorCode.refused, message: refusal.message)
        case is EngineStopping:
            self = RPCError(code: RPCErrorCode.shuttingDown, message: "the daemon is shutting down")
        default:
            self = RPCError(code: RPCErrorCode.internalError, message: "internal error: \(error)")
        }
    }

    /// A refused request of a `transfer.addMany`: -32602 with `data: {"code", "index"}`.
    public static func batchRefusal(_ refusal: BatchRefusal) -> RPCError {
        RPCError(
            code: RPCErrorCode.invalidParams, message: "request \(refusal.index): \(refusal.error.message)",
            data: .object([
                "code": .string(refusal.error.code.rawValue), "index": .int(Int64(refusal.index)),
            ]))
    }

    /// No job with that id (-32001).
    public static func notFound(_ id: Int64) -> RPCError {
        RPCError(code: RPCErrorCode.notFound, message: "job \(id) does not exist")
    }

    /// Params that do not fit the method (-32602 with `data.code` `invalid_request`).
    public static func invalidParams(_ message: String) -> RPCError {
        .refusedInput(.invalidRequest, "invalid params: \(message)")
    }
}
