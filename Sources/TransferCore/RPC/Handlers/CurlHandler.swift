/// `transfer.curl`: params `id`; result: `{"command": "curl …"}`, secrets shown as `***`.
/// Unknown id: -32001.
struct CurlHandler: RPCHandler {
    func handle(_ request: RPCRequest) throws -> RPCReply {
        let params = try request.decode(GetParams.self, members: ["id"])
        guard let command = request.context.service.curlCommand(params.id) else { throw RPCError.notFound(params.id) }
        return try .encoding(CurlResult(command: command))
    }
}
