/// Maps each ``RPCMethod`` to its handler and turns whatever a handler throws into a JSON-RPC
/// error (``RPCError/init(mapping:)``). Loop-thread only.
public final class RPCRouter {
    /// The handlers' shared context.
    public let context: RPCContext
    private let handlers: [RPCMethod: any RPCHandler]
    /// While true every request is answered with -32004 (the daemon is shutting down).
    public var isStopping = false

    /// A router with one handler per method.
    public init(context: RPCContext) {
        self.context = context
        var handlers: [RPCMethod: any RPCHandler] = [
            .transferAdd: AddHandler(),
            .transferAddMany: AddManyHandler(),
            .transferList: ListHandler(),
            .transferGet: GetHandler(),
            .transferCurl: CurlHandler(),
            .transferSetUrl: SetUrlHandler(),
            .transferSegments: SegmentsHandler(),
            .daemonStatus: DaemonStatusHandler(),
            .daemonShutdown: ShutdownHandler(),
            .daemonLimits: LimitsHandler(),
            .eventsSubscribe: SubscribeHandler(),
        ]
        for action in ControlAction.allCases { handlers[action.method] = ControlHandler(action: action) }
        self.handlers = handlers
    }

    /// Answers one request.
    /// - Returns: the result or the error, and whether the method may have changed jobs.
    public func answer(method: String, params: JSONValue?, connection: RPCConnection)
        -> (outcome: Result<RPCReply, RPCError>, changesJobs: Bool)
    {
        guard let name = RPCMethod(rawValue: method), let handler = handlers[name] else {
            return (
                .failure(RPCError(code: RPCErrorCode.methodNotFound, message: "method not found: \(method)")), false
            )
        }
        if isStopping {
            return (.failure(RPCError(code: RPCErrorCode.shuttingDown, message: "the daemon is shutting down")), false)
        }
        do {
            let reply = try handler.handle(RPCRequest(params: params, connection: connection, context: context))
            return (.success(reply), handler.changesJobs)
        } catch {
            return (.failure(RPCError(mapping: error)), handler.changesJobs)
        }
    }

    /// Commits the changes of the requests answered so far (group commit).
    /// - Returns: the error to answer those requests with, or nil.
    public func commit() -> RPCError? {
        do {
            try context.service.commit()
            return nil
        } catch {
            return RPCError(mapping: error)
        }
    }

    /// A line of the connection could not be read as a request: the batches it is sending are
    /// dropped (the line may have been one of their parts).
    public func lineLost(_ connection: RPCConnection) {
        for dropped in context.batches.dropOpen(owner: connection.number) {
            Log.info("dropped batch \(dropped.batch): a line of its connection was not a request")
        }
    }

    /// Forgets a closed connection's batches.
    public func connectionClosed(_ connection: RPCConnection) {
        context.batches.drop(owner: connection.number)
    }

    /// Drops batches that waited too long for a part.
    public func expireBatches() {
        for dropped in context.batches.expire() {
            Log.info("dropped batch \(dropped.batch): no part for \(Int(BatchAssembler.timeout)) s")
        }
    }
}
