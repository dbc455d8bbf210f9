/// `transfer.pause`, `resume`, `cancel`, `retry` and `remove`: params `ids` (and `deleteFiles` for
/// `remove`); result: `{"jobs": [...], "refused": [{"id", "state", "message"}]}`.
struct ControlHandler: RPCHandler {
    /// The action this method asks for.
    let action: ControlAction

    var changesJobs: Bool { true }

    func handle(_ request: RPCRequest) throws -> RPCReply {
        let params = try request.decode(
            ControlParams.self, members: action == .remove ? ["ids", "deleteFiles"] : ["ids"])
        // Answered at once, or once a job whose file is being put in place has ended.
        let later = RPCDeferredAnswer()
        request.context.service.control(
            action, ids: params.ids, deleteFiles: action == .remove && params.deleteFiles == true
        ) { result in
            later.answer(result.map { .json(Self.encode($0)) }.mapError { RPCError(mapping: $0) })
        }
        return .later(later)
    }

    /// The result's JSON: `{"jobs": [...], "refused": [...]}`.
    private static func encode(_ result: ControlResult) -> [UInt8] {
        var writer = JobJSONWriter(capacity: 1024 * (result.jobs.count + 1))
        writer.key("{\"jobs\":[")
        for (n, job) in result.jobs.enumerated() {
            if n > 0 { writer.key(",") }
            writer.write(job)
        }
        writer.key("],\"refused\":[")
        for (n, refusal) in result.refused.enumerated() {
            if n > 0 { writer.key(",") }
            writer.key("{\"id\":")
            writer.int(refusal.id)
            writer.key(",\"message\":")
            writer.string(refusal.message)
            writer.key(",\"state\":")
            writer.string(refusal.state?.rawValue)
            writer.key("}")
        }
        writer.key("]}")
        return writer.bytes
    }
}
