/// `transfer.segments`: params `id`; result: ``SegmentsResult`` (the ranges of a running
/// segmented download, by start; empty otherwise). Unknown id: -32001. Kept out of the job object,
/// whose fields are the SPEC's; `status` shows them.
struct SegmentsHandler: RPCHandler {
    func handle(_ request: RPCRequest) throws -> RPCReply {
        let params = try request.decode(GetParams.self, members: ["id"])
        guard let segments = request.context.service.segments(of: params.id) else {
            throw RPCError.notFound(params.id)
        }
        return try .encoding(SegmentsResult(segments: segments))
    }
}
