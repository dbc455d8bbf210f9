/// `transfer.addMany` (SPEC "Scale"): a list queued in one transaction, or none of it.
///
/// `{"requests": [...]}` queues the list at once. `{"batch": ID, "requests": [...], "final": false}`
/// parts, on one connection, are checked as they arrive and held (``BatchAssembler``); the part with
/// `"final": true` queues the whole batch. Results: `{"batch": ID, "received": N}` for a part that
/// is not the last; `{"jobs": [...]}` (request order) when queued. A refusal is -32602 with
/// `data.index`, counted from the batch's first request.
struct AddManyHandler: RPCHandler {
    var changesJobs: Bool { true }

    func handle(_ request: RPCRequest) throws -> RPCReply {
        let raw: [JSONValue]
        /// A part of a batch (nil: a list in one message).
        let part: (batch: String, final: Bool)?
        do {
            let params = try request.decode(Shape.self, members: ["batch", "requests", "final"])
            // Each request decoded on its own: one that does not decode is refused by its index,
            // as one that does not validate is.
            switch request.params?["requests"] {
            case .array(let values)?: raw = values
            case nil: throw RPCError.invalidParams("missing requests")
            default: throw RPCError.invalidParams("wrong type for requests")
            }
            switch (params.batch, params.final) {
            case (let batch?, let final?): part = (batch, final)
            case (nil, nil): part = nil
            case (_?, nil): throw RPCError.invalidParams("missing final (a batch part needs it)")
            case (nil, _?):
                // A first part without its batch id would be queued on its own: refused, so that
                // a list sent in parts never loses all-or-nothing to a forgotten member.
                throw RPCError.invalidParams("final without batch (a batch part needs both)")
            }
        } catch {
            // A part refused before its requests were read drops its batch, as any refused part
            // does (docs/rpc.md): the list must not be queued without it.
            if case .string(let batch)? = request.params?["batch"] {
                request.context.batches.refusePart(owner: request.connection.number, batch: batch)
            }
            throw error
        }
        let decoded: [Result<TransferRequest, TransferError>] = raw.map { value in
            guard case .object = value else {
                return .failure(TransferError(.invalidRequest, "not an object (a request is transfer.add's params)"))
            }
            if let name = TransferRequest.unknownMember(of: value) {
                return .failure(TransferError(.invalidRequest, "unknown param \(name)"))
            }
            do {
                return .success(try value.decode(as: TransferRequest.self))
            } catch {
                return .failure(TransferError(.invalidRequest, RPCRequest.describe(error)))
            }
        }
        let service = request.context.service
        guard let (batch, final) = part else {
            do {
                let requests = try decoded.enumerated().map { index, r in
                    try r.mapError { BatchRefusal(index: index, error: $0) }.get()
                }
                try BatchAssembler.checkDistinctDestinations(requests)
                return .stream(JobArrayStream(jobs: try service.addMany(requests)))
            } catch let refusal as BatchRefusal {
                // Checked in passes for speed: an earlier request may be refused by a later pass.
                throw BatchAssembler.firstRefusal(in: decoded, before: refusal.index, prepare: service.prepare)
                    ?? refusal
            }
        }
        let outcome = try request.context.batches.receive(
            owner: request.connection.number, batch: batch, decoded: decoded, final: final,
            prepare: service.prepare, stage: { try service.stage($0, batch: $1.storeKey) })
        switch outcome {
        case .partial(let received):
            return try .encoding(AddManyPartResult(batch: batch, received: received))
        case .complete(let complete):
            let ids: ClosedRange<Int64>
            do {
                ids = try service.addStaged(complete)
            } catch {
                service.discardStaged(batch: complete.key.storeKey)
                throw error
            }
            return .stream(JobRangeStream(service: service, ids: ids))
        }
    }

    /// The params but `requests` (decoded one by one above).
    private struct Shape: Decodable {
        var batch: String?
        var final: Bool?
    }
}
