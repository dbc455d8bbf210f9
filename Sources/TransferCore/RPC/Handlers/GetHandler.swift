/// `transfer.get`: params `id`; result: the job object. Unknown id: -32001.
struct GetHandler: RPCHandler {
    func handle(_ request: RPCRequest) throws -> RPCReply {
        let params = try request.decode(GetParams.self, members: ["id"])
        guard let job = request.context.service.job(params.id) else { throw RPCError.notFound(params.id) }
        return .job(job)
    }
}
