/// `daemon.limits`: params `download`, `upload`, `schedule` (each optional; as the `limit`
/// options take them, a number of bytes per second also accepted for a rate); result: the limits
/// in force now (``LimitsInForce``). A malformed value: -32602 `invalid_request`, nothing changed.
struct LimitsHandler: RPCHandler {
    func handle(_ request: RPCRequest) throws -> RPCReply {
        let params = try request.decode(LimitsParams.self, members: ["download", "upload", "schedule"])
        let service = request.context.service
        if params.download == nil && params.upload == nil && params.schedule == nil {
            return try .encoding(service.currentLimits())
        }
        return try .encoding(
            service.setLimits(download: params.download, upload: params.upload, schedule: params.schedule))
    }
}
