/// `transfer.list`: params `state` and `limit` (the first N in id order); result: one JSON array of
/// job objects, streamed a page at a time as the socket takes it.
struct ListHandler: RPCHandler {
    func handle(_ request: RPCRequest) throws -> RPCReply {
        let params = try request.decode(ListParams.self, members: ["state", "limit"])
        if let limit = params.limit, limit < 0 { throw RPCError.invalidParams("limit must be 0 or more") }
        return .stream(JobListStream(service: request.context.service, state: params.state, limit: params.limit))
    }
}
