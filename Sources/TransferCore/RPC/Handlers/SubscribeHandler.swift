/// `events.subscribe`: params `ids` (all jobs when absent) and `added` (false: not the
/// `transfer.state` of each new job); result `{"subscribed": true}`. The connection then receives
/// `transfer.progress` and `transfer.state` notifications.
struct SubscribeHandler: RPCHandler {
    func handle(_ request: RPCRequest) throws -> RPCReply {
        let params = try request.decode(SubscribeParams.self, members: ["ids", "added"])
        request.connection.subscribed = true
        request.connection.subscribedIds = params.ids.map(Set.init)
        request.connection.subscribedToAdded = params.added ?? true
        return .json(Array(#"{"subscribed":true}"#.utf8))
    }
}
