/// `transfer.add`: validates and queues one job; result: the job object.
struct AddHandler: RPCHandler {
    var changesJobs: Bool { true }

    func handle(_ request: RPCRequest) throws -> RPCReply {
        if let name = TransferRequest.unknownMember(of: request.params) {
            throw RPCError.refusedInput(.invalidRequest, "unknown param \(name)")
        }
        let params = try request.decode(TransferRequest.self)
        return .job(try request.context.service.add(params))
    }
}
