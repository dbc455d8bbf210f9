/// `transfer.setUrl`: params `id`, `url`; result: the job object. Unknown id: -32001; a job that
/// is not a queued, paused, waiting or failed download: -32002; a bad URL: -32602.
struct SetUrlHandler: RPCHandler {
    var changesJobs: Bool { true }

    func handle(_ request: RPCRequest) throws -> RPCReply {
        let params = try request.decode(SetUrlParams.self, members: ["id", "url"])
        guard let job = try request.context.service.setURL(params.id, url: params.url) else {
            throw RPCError.notFound(params.id)
        }
        return .job(job)
    }
}
