/// `daemon.shutdown`: result `{}`; then the daemon stops as on SIGTERM and `run` returns 0.
struct ShutdownHandler: RPCHandler {
    func handle(_ request: RPCRequest) throws -> RPCReply {
        try request.refuseUnknownMembers([])
        request.context.requestShutdown()
        return .json(Array("{}".utf8))
    }
}
