import Foundation

/// The JSON-RPC 2.0 server on the daemon's Unix socket: one JSON object a line, only peers with the
/// daemon's uid, never exits on bad input. It frames and parses; ``RPCRouter`` answers.
///
/// Answers to the lines of one read wait for one group commit (``RPCRouter/commit()``) and are
/// then sent in order. Loop-thread only.
public final class RPCServer {
    /// How often idle batches are looked for (``BatchAssembler/timeout``).
    static let batchCheckInterval: UInt64 = 1000
    /// How long after the last client left the heap is trimmed (ms).
    static let trimDelay: UInt64 = 500

    private let router: RPCRouter
    private var listener: PipeListener?
    private var connections: [ObjectIdentifier: RPCConnection] = [:]
    private var nextConnection = 1
    private let batchTimer: LoopTimer
    /// Trims the heap once the last client is gone (``HeapTrimmer``).
    private let trimTimer: LoopTimer
    private var closed = false

    /// A request answered but not sent yet: it waits for the group commit.
    private struct PendingResponse {
        let connection: RPCConnection
        let id: JSONValue?
        let outcome: Result<RPCReply, RPCError>
        let changesJobs: Bool
    }
    private var pending: [PendingResponse] = []
    private let loop: EventLoop
    /// Connections whose requests waited for an answer given later, and go on now.
    private var released: [RPCConnection] = []
    /// Lets them go on in a pass of their own (``LoopCheck``), after the one that gave the answer.
    private var releaseCheck: LoopCheck!

    /// Binds and listens on `path` (the caller made its directory private first), or listens on
    /// `inheritedFD`, a socket systemd passed (socket activation), and binds nothing.
    /// - Throws: ``UVError`` when the socket cannot be bound.
    public init(loop: EventLoop, path: String, router: RPCRouter, inheritedFD: Int32? = nil) throws {
        self.router = router
        self.loop = loop
        batchTimer = LoopTimer(loop: loop)
        trimTimer = LoopTimer(loop: loop)
        if let fd = inheritedFD {
            listener = try PipeListener(loop: loop, inheritedFD: fd) { [unowned self] pipe in self.accepted(pipe) }
        } else {
            listener = try PipeListener(loop: loop, path: path) { [unowned self] pipe in self.accepted(pipe) }
        }
        batchTimer.start(after: Self.batchCheckInterval, repeating: Self.batchCheckInterval) { [unowned self] in
            self.router.expireBatches()
        }
        batchTimer.unref()
        releaseCheck = LoopCheck(loop: loop) { [unowned self] in
            let ready = self.released
            self.released = []
            for conn in ready where !conn.closed { conn.resumeInput() }
        }
    }

    private func accepted(_ pipe: PipeStream) {
        let conn = RPCConnection(server: self, pipe: pipe, number: nextConnection)
        nextConnection += 1
        connections[ObjectIdentifier(conn)] = conn
        conn.startReading()
    }

    func forget(_ conn: RPCConnection) {
        connections[ObjectIdentifier(conn)] = nil
        router.connectionClosed(conn)
        if connections.isEmpty && !closed {
            // After a burst of clients, give the memory their buffers used back to the system.
            trimTimer.start(after: Self.trimDelay) { [unowned self] in
                if self.connections.isEmpty { HeapTrimmer.trim() }
            }
            trimTimer.unref()
        }
    }

    // MARK: - Requests

    /// Answers a message that cannot be handled (over 1 MiB, not JSON, not a request) with a null
    /// id; the batches the connection is sending are dropped (the message may have been a part).
    func reject(_ conn: RPCConnection, _ error: RPCError) {
        router.lineLost(conn)
        pending.append(PendingResponse(connection: conn, id: .null, outcome: .failure(error), changesJobs: false))
    }

    /// Parses one line and has the router answer it; the answer waits for ``endOfInput()``.
    func handleLine(_ line: [UInt8], from conn: RPCConnection) {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
        let value: JSONValue
        do {
            value = try JSONParser.parse(line)
        } catch {
            return reject(conn, RPCError(code: RPCErrorCode.parseError, message: "parse error: not JSON"))
        }
        guard case .object(let obj) = value else {
            return reject(conn, RPCError(code: RPCErrorCode.invalidRequest, message: "a request must be a JSON object"))
        }
        let id = obj["id"]
        if let id {
            // JSON-RPC 2.0: a string, a number or null, echoed as given (a number beyond Int64 or
            // with a fraction as the double it reads as).
            switch id {
            case .string, .int, .double, .null: break
            default: return reject(conn, RPCError(code: RPCErrorCode.invalidRequest, message: "invalid id"))
            }
        }
        func refuse(_ error: RPCError) {
            pending.append(
                PendingResponse(connection: conn, id: id ?? .null, outcome: .failure(error), changesJobs: false))
        }
        guard obj["jsonrpc"] == .string("2.0"), case .string(let method)? = obj["method"] else {
            router.lineLost(conn)  // not a request it can route: perhaps a batch's part
            return refuse(
                RPCError(
                    code: RPCErrorCode.invalidRequest,
                    message: "not a JSON-RPC 2.0 request (jsonrpc \"2.0\" and a method are required)"))
        }
        // Params are named (an object); null counts as none. Anything else is refused — with no
        // answer to a notification, which never gets one.
        var params = obj["params"]
        switch params {
        case .object?, nil: break
        case .null?: params = nil
        default:
            // A batch's part that cannot be read is lost; another method's request is only refused.
            if method == RPCMethod.transferAddMany.rawValue { router.lineLost(conn) }
            guard id != nil else { return }
            return refuse(.invalidParams("params must be an object"))
        }
        let answer = router.answer(method: method, params: params, connection: conn)
        if case .success(.later(let later)) = answer.outcome, later.outcome == nil {
            // Decided later: the connection's next requests wait, and go on in a pass of their
            // own once it is (not inside whatever gives the answer).
            conn.holdInput()
            later.whenAnswered { [weak self, weak conn] _ in
                guard let self, let conn else { return }
                self.released.append(conn)
                self.releaseCheck.arm()
            }
        }
        if method == RPCMethod.eventsSubscribe.rawValue, let id, !pending.contains(where: { $0.connection === conn }) {
            // Answered at once (it changes no job): the events of requests read with it, sent
            // when they are committed, come after the answer that says they will come.
            send(answer.outcome, id: id, to: conn)
            return
        }
        // A notification (no id) gets no answer, but its changes are committed all the same.
        pending.append(
            PendingResponse(connection: conn, id: id, outcome: answer.outcome, changesJobs: answer.changesJobs))
    }

    /// Ends a read: commits once for every request answered in it, then sends the answers in order.
    func endOfInput() {
        guard !pending.isEmpty else { return }
        let responses = pending
        pending = []
        // A request's own changes are written before it is answered (adds insert in their own
        // transaction, control commands commit their rows before acting), so a failing group
        // commit here (the home's disk full) concerns only bookkeeping that stays pending: it
        // does not turn those answers into errors.
        if responses.contains(where: \.changesJobs), let failure = router.commit() {
            Log.info("answering before a group commit that failed: \(failure.message)")
        }
        for response in responses {
            guard let id = response.id, !response.connection.closed else { continue }
            send(response.outcome, id: id, to: response.connection)
        }
    }

    /// The response line before its result: `{"id":ID,"jsonrpc":"2.0","result":` (sorted keys,
    /// which the CLI relies on to stream a result).
    private static func head(id: JSONValue) -> [UInt8] {
        var writer = JobJSONWriter(capacity: 64)
        writer.key("{\"id\":")
        writer.id(id)
        writer.key(",\"jsonrpc\":\"2.0\",\"result\":")
        return writer.bytes
    }

    private struct ErrorResponse: Encodable {
        let error: RPCError
        let id: JSONValue
        let jsonrpc = "2.0"
    }

    private func send(_ outcome: Result<RPCReply, RPCError>, id: JSONValue, to conn: RPCConnection) {
        switch outcome {
        case .success(.stream(let stream)):
            conn.send(head: Self.head(id: id), stream: stream)
        case .success(.later(let answer)):
            conn.send(later: answer) { Self.line($0, id: id) }
        default:
            if let line = Self.line(outcome, id: id) { conn.send(line) }
        }
    }

    /// The response line (without its newline) of a JSON result or an error; nil for a streamed
    /// or deferred result, which are not lines of their own.
    private static func line(_ outcome: Result<RPCReply, RPCError>, id: JSONValue) -> [UInt8]? {
        switch outcome {
        case .success(.json(let result)):
            var line = head(id: id)
            // Room for the closing brace and the newline the writer adds: a long answer (a
            // command on 30,000 jobs) is not copied again to grow by a byte.
            line.reserveCapacity(line.count + result.count + 2)
            line += result
            line.append(UInt8(ascii: "}"))
            return line
        case .success(.stream), .success(.later):
            return nil
        case .failure(let error):
            return try? RPCReply.json(ErrorResponse(error: error, id: id))
        }
    }

    // MARK: - Notifications

    /// Whether any connection listens to events (the engine builds job objects only then).
    public var hasSubscribers: Bool { connections.values.contains { $0.subscribed } }

    /// One notification for the subscribers.
    public struct Event {
        /// `transfer.state` or `transfer.progress`.
        public var method: RPCMethod
        /// The job object it carries.
        public var job: JobSnapshot
        /// Whether it tells of a new job (left out for subscribers that declined those).
        public var added: Bool

        /// Creates the notification.
        public init(method: RPCMethod, job: JobSnapshot, added: Bool = false) {
            self.method = method
            self.job = job
            self.added = added
        }
    }

    /// Sends notifications (in order) to every subscribed connection interested in each: one
    /// write a connection for all of them, not one an event (a list of 2,000 jobs queues 2,000
    /// at once).
    public func broadcast(_ events: [Event]) {
        let subscribers = connections.values.filter { $0.subscribed }
        guard !subscribers.isEmpty, !events.isEmpty else { return }
        var out: [ObjectIdentifier: [UInt8]] = [:]
        var writer = JobJSONWriter(capacity: 1024)
        for event in events {
            let job = event.job
            let targets = subscribers.filter {
                ($0.subscribedIds?.contains(job.id) ?? true) && (!event.added || $0.subscribedToAdded)
            }
            guard !targets.isEmpty else { continue }
            writer.bytes.removeAll(keepingCapacity: true)
            writer.key("{\"jsonrpc\":\"2.0\",\"method\":")
            writer.string(event.method.rawValue)
            writer.key(",\"params\":")
            writer.write(job)
            writer.key("}\n")
            for c in targets { out[ObjectIdentifier(c), default: []].append(contentsOf: writer.bytes) }
        }
        for c in subscribers {
            if let lines = out[ObjectIdentifier(c)] { c.notify(lines: lines) }
        }
    }

    /// The loop's clock (ms), for the connections.
    var nowMillis: UInt64 { loop.nowMillis }

    /// How long a stopping daemon waits for its clients to take their last answers (ms).
    public static let flushBudget: UInt64 = 1000
    /// How long in all it waits for a client that keeps reading (a long list being streamed to
    /// it), so that its last line is not cut (ms): well inside SPEC's 5 s to exit.
    public static let flushBudgetWhileReading: UInt64 = 3000
    /// A client that took output this recently (ms) counts as reading (a Unix socket takes a
    /// slow reader's bytes in bursts, as room frees in its buffers).
    static let readingWindow: UInt64 = 1000

    /// Stops accepting, lets every connection write what it still owes (answers, a waiting
    /// command's `-32004`, the last events) for at most `budget` ms — up to
    /// ``flushBudgetWhileReading`` while a client with output left keeps taking it — then closes
    /// them all and calls `done`. A client that does not read loses what is left after the budget.
    public func close(flushingFor budget: UInt64 = RPCServer.flushBudget, then done: @escaping () -> Void) {
        stopAccepting()
        let start = loop.nowMillis
        let deadline = start + budget
        let longest = start + max(budget, Self.flushBudgetWhileReading)
        let poll = LoopTimer(loop: loop)
        // A client reads when the kernel takes its bytes: a write done, or the one under way
        // shorter than at the last look (a long piece of a stream is taken a bit at a time).
        var unsent: [ObjectIdentifier: Int] = [:]
        var lastRead = start
        func check() {
            let now = loop.nowMillis
            let owing = connections.values.filter(\.hasPendingOutput)
            for c in owing {
                let left = c.unsentBytes
                if left < unsent[ObjectIdentifier(c)] ?? Int.max || c.lastOutputTakenAt > lastRead {
                    lastRead = max(lastRead, now)
                }
                unsent[ObjectIdentifier(c)] = left
            }
            let reading = now - lastRead < Self.readingWindow
            if !owing.isEmpty && (now < deadline || (reading && now < longest)) { return }
            poll.close()
            close()
            done()
        }
        poll.start(after: 0, repeating: 5) { check() }
    }

    /// Stops accepting and closes every connection (their batches are dropped).
    public func close() {
        guard !closed else { return }
        closed = true
        batchTimer.close()
        releaseCheck.close()
        trimTimer.close()
        stopAccepting()
        for c in Array(connections.values) { c.close() }
    }

    /// Closes the listening socket; the connections stay (a stopping daemon's last events).
    public func stopAccepting() {
        listener?.close()
        listener = nil
    }
}
