import Foundation

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Why the client could not talk to the daemon (as opposed to an ``RPCError`` the daemon sent).
public enum ClientError: Error, Sendable, Equatable, CustomStringConvertible {
    /// No daemon answers at `path` (no socket, a stale socket, or no permission).
    case unreachable(path: String, reason: String)
    /// The daemon at `path` runs as another user (`uid`), and serves only its own user.
    case foreignDaemon(path: String, uid: UInt32)
    /// The daemon closed the connection before answering.
    case connectionClosed
    /// The daemon did not answer within the client's timeout.
    case timeout(method: String)
    /// A system call failed while talking to the daemon.
    case io(operation: String, errno: Int32)
    /// The daemon sent something that is not a JSON-RPC 2.0 response.
    case protocolViolation(String)

    /// A message for people.
    public var description: String {
        switch self {
        case .unreachable(let path, let reason):
            return "cannot reach aftransferd at \(path): \(reason)"
        case .foreignDaemon(let path, let uid):
            return "the aftransferd at \(path) runs as another user (uid \(uid)) and serves only that user"
        case .connectionClosed:
            return "aftransferd closed the connection"
        case .timeout(let method):
            return "aftransferd did not answer \(method) in time"
        case .io(let operation, let code):
            return "\(operation) failed: \(String(cString: strerror(code)))"
        case .protocolViolation(let what):
            return "unexpected message from aftransferd: \(what)"
        }
    }
}

/// What ``RPCClient/streamEvents(tickInterval:onEvent:)`` hands to its closure.
public enum RPCEvent: Sendable {
    /// `transfer.progress`: a running job's object.
    case progress(JobSnapshot)
    /// `transfer.state`: a job's object after a state change.
    case state(JobSnapshot)
    /// `transfer.removed`: a removed job's last object.
    case removed(JobSnapshot)
    /// Any other notification, undecoded.
    case notification(method: String, params: JSONValue?)
    /// Time passed: sent once when the stream starts, then at least every `tickInterval` seconds.
    /// Lets the caller poll (`transfer.get`) in case a notification is missed.
    case tick

    /// The event a notification `method` makes of the job its params are; nil for a method that
    /// carries no job (its params are then not read as one). One mapping for both ways a line is
    /// read (``JobObjectReader`` and the tree).
    static func carrying(method: String) -> ((JobSnapshot) -> RPCEvent)? {
        switch method {
        case RPCMethod.transferProgress.rawValue: return RPCEvent.progress
        case RPCMethod.transferState.rawValue: return RPCEvent.state
        case RPCMethod.transferRemoved.rawValue: return RPCEvent.removed
        default: return nil
        }
    }
}

/// A blocking JSON-RPC 2.0 client for the daemon's Unix socket (`docs/rpc.md`): one JSON object a
/// line in both directions. Needs no event loop; meant for the CLI, one thread at a time.
public final class RPCClient {
    /// How long ``call(method:params:)`` waits for its answer by default, in seconds.
    public static let defaultTimeout: Double = 60
    /// The longest line accepted from the daemon (a `transfer.list` of many jobs can be big).
    public static let maximumLineLength = 256 * 1024 * 1024

    /// The socket path this client is connected to.
    public let path: String
    /// How long a call waits for its answer, in seconds.
    public var timeout: Double

    private var fd: Int32
    private var nextID: Int64 = 1
    private var buffer = LineBuffer(maximumLineLength: RPCClient.maximumLineLength)
    /// Notifications read while waiting for a response, delivered later by `streamEvents`.
    private var pending: [RPCEvent] = []
    /// The first event of ``pending`` not yet handed out.
    private var pendingHead = 0

    private init(fd: Int32, path: String, timeout: Double) {
        self.fd = fd
        self.path = path
        self.timeout = timeout
        peerUID = SocketPeer.uid(fd)
    }

    /// The uid of the process that listens on the socket (SO_PEERCRED), when the kernel says.
    private let peerUID: UInt32?

    /// The error of a connection the daemon closed: when the socket is another user's, that
    /// daemon refused this user (it serves only its own uid, and closes anyone else's connection
    /// without a word), which is said instead ("closed the connection", and `daemon stop` waited
    /// 10 s for a daemon it could not stop: found by an outside audit). Only then: a socket
    /// that a system unit opened as root for the user's daemon answers as usual.
    private var closedError: ClientError {
        if let peerUID, peerUID != getuid() { return .foreignDaemon(path: path, uid: peerUID) }
        return .connectionClosed
    }

    deinit {
        if fd >= 0 { _ = Glibc.close(fd) }
    }

    /// Connects to the daemon's socket.
    /// - Parameters:
    ///   - path: the socket path (absolute).
    ///   - timeout: how long calls wait for an answer; ``defaultTimeout`` by default.
    /// - Throws: ``ClientError/unreachable(path:reason:)`` when nothing accepts the connection.
    public static func connect(path: String, timeout: Double = RPCClient.defaultTimeout) throws -> RPCClient {
        guard let address = UnixSocketAddress(path) else {
            throw ClientError.unreachable(
                path: path, reason: "socket path longer than \(UnixSocketAddress.maximumLength) bytes")
        }
        while true {
            let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
            guard fd >= 0 else { throw ClientError.io(operation: "socket", errno: errno) }
            let result = address.withSockaddr { Glibc.connect(fd, $0, $1) }
            if result == 0 { return RPCClient(fd: fd, path: path, timeout: timeout) }
            let code = errno
            _ = Glibc.close(fd)
            // An interrupted connect goes on in the background; a fresh socket is simpler than
            // waiting for it.
            if code == EINTR { continue }
            throw ClientError.unreachable(path: path, reason: String(cString: strerror(code)))
        }
    }

    /// Closes the connection. Later calls fail with ``ClientError/connectionClosed``.
    public func close() {
        if fd >= 0 { _ = Glibc.close(fd) }
        fd = -1
    }

    // MARK: - Calls

    /// Sends one request and waits for its response, keeping notifications that arrive meanwhile
    /// for ``streamEvents(tickInterval:onEvent:)``.
    /// - Parameters:
    ///   - method: the method name (``RPCMethod``).
    ///   - params: the params object, or nil to send none.
    /// - Returns: the response's `result`.
    /// - Throws: ``RPCError`` when the daemon answers with an error; ``ClientError`` otherwise.
    @discardableResult
    public func call(method: String, params: JSONValue? = nil) throws -> JSONValue {
        let id = try sendRequest(method: method, params: params)
        return try awaitResponse(id: id, method: method, deadline: Self.now() + timeout)
    }

    /// Sends one request whose params are already JSON text, without waiting for its answer: a
    /// client that pipelines (the parts of a long `transfer.addMany`) sends several, then takes
    /// each answer with ``response(to:method:)`` or ``streamResult(of:method:into:)``, in order.
    /// - Parameters:
    ///   - method: the method name (``RPCMethod``).
    ///   - params: the params object's JSON text, or nil to send none.
    /// - Returns: the request's id.
    /// - Throws: ``ClientError``.
    public func post(method: String, params: [UInt8]?) throws -> Int64 {
        let id = nextID
        nextID += 1
        // The envelope with sorted keys, as ``JobJSONWriter/value(_:)`` writes an object.
        var writer = JobJSONWriter(capacity: (params?.count ?? 0) + 96)
        writer.key(#"{"id":"#)
        writer.int(id)
        writer.key(#","jsonrpc":"2.0","method":"#)
        writer.string(method)
        if let params {
            writer.key(#","params":"#)
            writer.raw(params)
        }
        writer.key("}\n")
        try send(Data(writer.bytes))
        return id
    }

    /// Waits for the answer to a request sent with ``post(method:params:)``.
    /// - Returns: the response's `result`.
    /// - Throws: ``RPCError`` when the daemon answers with an error; ``ClientError`` otherwise.
    public func response(to id: Int64, method: String) throws -> JSONValue {
        try awaitResponse(id: id, method: method, deadline: Self.now() + timeout)
    }

    /// An answer whose result is `{"jobs": [job or null, …]}` (``jobsResponse(to:method:)``).
    public enum JobsAnswer: Sendable {
        /// Read straight into jobs, in order; nil for each `null` (a job removed before its
        /// object was written).
        case jobs([JobSnapshot?])
        /// The line was the tree path's (``JobObjectReader`` left it): its `result`, for the
        /// caller to read as it would any other.
        case result(JSONValue)
    }

    /// Waits for the answer to a request sent with ``post(method:params:)`` whose result is
    /// `{"jobs": [job or null, …]}` (`transfer.addMany`), reading the job objects straight from
    /// the response line (``JobObjectReader``) when it can.
    /// - Throws: ``RPCError`` when the daemon answers with an error; ``ClientError`` otherwise.
    public func jobsResponse(to id: Int64, method: String) throws -> JobsAnswer {
        let deadline = Self.now() + timeout
        while true {
            let read = try readIncoming(until: deadline) { line -> (jobs: [JobSnapshot?]?, incoming: Incoming?) in
                if let jobs = JobObjectReader.jobsResponse(line, id: id) { return (jobs, nil) }
                return (nil, Self.incoming(line))
            }
            guard let read else { throw ClientError.timeout(method: method) }
            if let jobs = read.jobs { return .jobs(jobs) }
            if let incoming = read.incoming, let result = try answer(incoming, to: id, method: method) {
                return .result(result)
            }
        }
    }

    /// What ``callStreamingResult(method:params:into:)`` did with the response.
    public enum StreamedResponse: Sendable, Equatable {
        /// The result's bytes went to the sink as the daemon wrote them; `byteCount` of them.
        case streamed(byteCount: Int)
        /// The response did not start as `{"id":N,"jsonrpc":"2.0","result":` (another key order, or
        /// a notification first): it was read whole, and this is its result.
        case decoded(JSONValue)
    }

    /// Sends one request and copies the bytes of its result to `sink` as they arrive, without
    /// holding the whole response: for a result too big to decode at once (`transfer.list` of
    /// 100,000 jobs).
    ///
    /// The daemon writes responses with sorted keys, so a result starts with
    /// `{"id":N,"jsonrpc":"2.0","result":` and ends with `}`; the bytes between go to `sink`, in
    /// order, over as many calls as the reads take. Any other response (an error, another key
    /// order) is read whole and handled as ``call(method:params:)`` does. `timeout` counts from the
    /// last byte received, so a long result does not time out while it flows.
    /// - Parameters:
    ///   - method: the method name (``RPCMethod``).
    ///   - params: the params object, or nil to send none.
    ///   - sink: receives the result's bytes, in order.
    /// - Returns: ``StreamedResponse/streamed(byteCount:)``, or the decoded result when the
    ///   response could not be streamed.
    /// - Throws: ``RPCError`` when the daemon answers with an error; ``ClientError`` otherwise;
    ///   whatever `sink` throws.
    public func callStreamingResult(
        method: String, params: JSONValue? = nil, into sink: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> StreamedResponse {
        try streamResult(of: try sendRequest(method: method, params: params), method: method, into: sink)
    }

    /// Copies the bytes of the result of request `id` (sent, not yet answered) to `sink` as they
    /// arrive, as ``callStreamingResult(method:params:into:)`` does.
    public func streamResult(
        of id: Int64, method: String, into sink: (UnsafeRawBufferPointer) throws -> Void
    ) throws -> StreamedResponse {
        let prefix = Array(#"{"id":\#(id),"jsonrpc":"2.0","result":"#.utf8)
        var head = buffer.takeAll()
        var deadline = Self.now() + timeout
        while head.count < prefix.count || !head.starts(with: prefix) {
            let n = min(head.count, prefix.count)
            if !head[..<n].elementsEqual(prefix[..<n]) {
                buffer.append(head)
                return .decoded(try awaitResponse(id: id, method: method, deadline: deadline))
            }
            guard let chunk = try readChunk(until: deadline) else { throw ClientError.timeout(method: method) }
            head += chunk
            deadline = Self.now() + timeout
        }
        // The last byte before the newline is the response's closing `}`, not the result's: each
        // chunk's last byte waits until the next one shows whether the line ends there.
        var body = head[prefix.count...]
        var held: [UInt8] = []
        var count = 0
        while true {
            if let newline = body.firstIndex(of: UInt8(ascii: "\n")) {
                var content = held + body[..<newline]
                if content.last == UInt8(ascii: "\r") { content.removeLast() }
                guard content.last == UInt8(ascii: "}") else {
                    throw ClientError.protocolViolation("a \(method) response that does not end with }")
                }
                content.removeLast()
                try content.withUnsafeBytes(sink)
                buffer.append(body[(newline + 1)...])
                return .streamed(byteCount: count + content.count)
            }
            if let last = body.last {
                // Handed over in place (a copy of every chunk was an eighth of the CLI's time for
                // a 40 MiB result): the byte held back from the chunk before, then this one's.
                if !held.isEmpty { try held.withUnsafeBytes(sink) }
                try body.dropLast().withUnsafeBytes(sink)
                count += held.count + body.count - 1
                held = [last]
            }
            guard let chunk = try readChunk(until: deadline) else { throw ClientError.timeout(method: method) }
            body = chunk[...]
            deadline = Self.now() + timeout
        }
    }

    /// Writes one request line; returns its id.
    private func sendRequest(method: String, params: JSONValue?) throws -> Int64 {
        try post(
            method: method,
            params: params.map { params in
                var writer = JobJSONWriter(capacity: 256)
                writer.value(params)
                return writer.bytes
            })
    }

    /// Reads lines until the response to `id`, keeping notifications for ``streamEvents(tickInterval:onEvent:)``.
    private func awaitResponse(id: Int64, method: String, deadline: Double) throws -> JSONValue {
        while true {
            guard let incoming = try readIncoming(until: deadline) else { throw ClientError.timeout(method: method) }
            if let result = try answer(incoming, to: id, method: method) { return result }
        }
    }

    /// What a line read while waiting for the answer to request `id` means: its `result` when it
    /// is that answer, nil when it is something else (an event is kept for ``streamEvents``).
    /// - Throws: the answer's ``RPCError``; ``ClientError/protocolViolation(_:)`` for junk.
    private func answer(_ incoming: Incoming, to id: Int64, method: String) throws -> JSONValue? {
        let fields: [String: JSONValue]
        switch incoming {
        case .junk(let what):
            throw ClientError.protocolViolation(what)
        case .event(let event):
            pending.append(event)
            return nil
        case .message(let members):
            fields = members
        }
        // A parse error is answered with a null id: it can only be about our request.
        let answers: Bool
        switch fields["id"] {
        case .int(let other)?: answers = other == id
        case .null?: answers = fields["error"] != nil
        default: answers = false
        }
        guard answers else { return nil }
        if let error = fields["error"], error != .null {
            guard let rpcError = try? error.decode(as: RPCError.self) else {
                throw ClientError.protocolViolation("an error object without code and message")
            }
            throw rpcError
        }
        return fields["result"] ?? .null
    }

    /// Sends a typed request and decodes the typed result.
    /// - Parameters:
    ///   - method: the method name (``RPCMethod``).
    ///   - params: the params, encoded as a JSON object.
    ///   - result: the type the result decodes as.
    public func call<P: Encodable, R: Decodable>(method: String, params: P, as result: R.Type = R.self) throws -> R {
        let value = try call(method: method, params: JSONValue(encoding: params))
        do {
            return try value.decode(as: R.self)
        } catch {
            throw ClientError.protocolViolation("a \(method) result that does not decode: \(error)")
        }
    }

    // MARK: - Events

    /// Subscribes to job events (`events.subscribe`) and streams them to `onEvent` until it returns
    /// false.
    /// - Parameters:
    ///   - ids: the jobs to hear about, or nil for all jobs.
    ///   - tickInterval: the longest time between two ``RPCEvent/tick`` events, in seconds.
    ///   - onEvent: called for each notification and tick; may itself use ``call(method:params:)``.
    public func subscribe(
        ids: [Int64]? = nil, tickInterval: Double = 1, onEvent: (RPCEvent) throws -> Bool
    ) throws {
        try call(method: RPCMethod.eventsSubscribe.rawValue, params: JSONValue(encoding: SubscribeParams(ids: ids)))
        try streamEvents(tickInterval: tickInterval, onEvent: onEvent)
    }

    /// Streams notifications already subscribed to (and ticks) to `onEvent` until it returns false.
    /// Starts with a ``RPCEvent/tick``, so that a caller that polls sees the current state at once.
    /// - Parameters:
    ///   - tickInterval: the longest time between two ``RPCEvent/tick`` events, in seconds.
    ///   - onEvent: called for each notification and tick; may itself use ``call(method:params:)``.
    public func streamEvents(tickInterval: Double = 1, onEvent: (RPCEvent) throws -> Bool) throws {
        var nextTick = Self.now()
        while true {
            if Self.now() >= nextTick {
                nextTick = Self.now() + tickInterval
                guard try onEvent(.tick) else { return }
                continue
            }
            if pendingHead < pending.count {
                // Taken by index, not removeFirst(): thousands of queued events stay O(1) each.
                let event = pending[pendingHead]
                pendingHead += 1
                if pendingHead == pending.count {
                    pending.removeAll(keepingCapacity: true)
                    pendingHead = 0
                }
                guard try onEvent(event) else { return }
                continue
            }
            // A stray response or junk is not an event.
            guard case .event(let event)? = try readIncoming(until: nextTick) else { continue }
            pending.append(event)
        }
    }

    /// A line read from the daemon.
    private enum Incoming {
        /// A notification.
        case event(RPCEvent)
        /// Any other JSON object (a response), its members.
        case message([String: JSONValue])
        /// Not a JSON object: why.
        case junk(String)
    }

    /// Reads the next line, or returns nil when `deadline` passes first. A job notification is
    /// read by ``JobObjectReader`` straight from the read buffer (a follower of thousands of jobs
    /// gets one a job a state change); anything else through ``JSONParser``.
    private func readIncoming(until deadline: Double) throws -> Incoming? {
        try readIncoming(until: deadline) { Self.incoming($0) }
    }

    /// Reads the next line and returns what `read` makes of its bytes (in place), or nil when
    /// `deadline` passes first.
    private func readIncoming<T>(until deadline: Double, _ read: (UnsafeRawBufferPointer) -> T) throws -> T? {
        while true {
            let value: T?
            do {
                value = try buffer.withNextLine(read)
            } catch is LineBuffer.LineTooLong {
                throw ClientError.protocolViolation("a line over \(buffer.maximumLineLength) bytes")
            }
            if let value { return value }
            guard try readAvailable(until: deadline) else { return nil }
        }
    }

    private static func incoming(_ line: UnsafeRawBufferPointer) -> Incoming {
        if let event = JobObjectReader.notification(line) { return .event(event) }
        let message: JSONValue
        do {
            message = try JSONParser.parse(line)
        } catch {
            return .junk("a line that is not JSON")
        }
        guard case .object(let fields) = message else { return .junk("a JSON value that is not an object") }
        if fields["id"] == nil, case .string(let name)? = fields["method"] {
            return .event(event(method: name, params: fields["params"]))
        }
        return .message(fields)
    }

    private static func event(method: String, params: JSONValue?) -> RPCEvent {
        if let makeEvent = RPCEvent.carrying(method: method), let job = try? params?.decode(as: JobSnapshot.self) {
            return makeEvent(job)
        }
        return .notification(method: method, params: params)
    }

    // MARK: - I/O

    private func send(_ data: Data) throws {
        guard fd >= 0 else { throw ClientError.connectionClosed }
        try data.withUnsafeBytes { (raw: UnsafeRawBufferPointer) in
            guard let base = raw.baseAddress else { return }
            var offset = 0
            while offset < raw.count {
                // MSG_NOSIGNAL: a daemon that went away is an error here, not a SIGPIPE.
                let n = Glibc.send(fd, base + offset, raw.count - offset, Int32(MSG_NOSIGNAL))
                if n < 0 {
                    if errno == EINTR { continue }
                    if errno == EPIPE || errno == ECONNRESET { throw closedError }
                    throw ClientError.io(operation: "send", errno: errno)
                }
                offset += n
            }
        }
    }

    /// Reads what the socket has (at least one byte) into the line buffer; false when `deadline`
    /// passes first.
    private func readAvailable(until deadline: Double) throws -> Bool {
        guard let n = try readIntoScratch(until: deadline) else { return false }
        buffer.append(scratch[0..<n])
        return true
    }

    /// Reads what the socket has (at least one byte), or nil when `deadline` passes first.
    private func readChunk(until deadline: Double) throws -> [UInt8]? {
        guard let n = try readIntoScratch(until: deadline) else { return nil }
        return Array(scratch[0..<n])
    }

    /// Where reads land: allocated once, not 64 KiB filled with zeros a read (a follower wakes up
    /// for every write of the daemon's, thousands a second).
    private var scratch = [UInt8](repeating: 0, count: 64 * 1024)

    /// Reads what the socket has into ``scratch``: the byte count (at least one), or nil when
    /// `deadline` passes first.
    private func readIntoScratch(until deadline: Double) throws -> Int? {
        while true {
            guard fd >= 0 else { throw ClientError.connectionClosed }
            let remaining = deadline - Self.now()
            if remaining <= 0 { return nil }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ready = Glibc.poll(&pfd, 1, Int32(min(remaining * 1000 + 1, Double(Int32.max))))
            if ready < 0 {
                if errno == EINTR { continue }
                throw ClientError.io(operation: "poll", errno: errno)
            }
            if ready == 0 { continue }
            let n = scratch.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                if errno == ECONNRESET { throw closedError }
                throw ClientError.io(operation: "read", errno: errno)
            }
            if n == 0 { throw closedError }
            return n
        }
    }

    private static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

/// Splits a byte stream into `\n`-terminated lines; a line may arrive over several reads.
struct LineBuffer {
    /// Thrown when a line grows past the limit before its newline arrives.
    struct LineTooLong: Error {}

    let maximumLineLength: Int
    private var bytes: [UInt8] = []
    /// Where the unread bytes start (consumed lines are dropped lazily).
    private var start = 0
    /// Where to resume looking for a newline (bytes before it have none).
    private var scanned = 0

    init(maximumLineLength: Int) {
        self.maximumLineLength = maximumLineLength
    }

    /// Adds bytes just read.
    mutating func append<C: Collection>(_ data: C) where C.Element == UInt8 {
        if start > 0, start * 2 >= bytes.count {
            bytes.removeSubrange(0..<start)
            scanned -= start
            start = 0
        }
        bytes.append(contentsOf: data)
    }

    /// Takes every byte not yet returned as a line, leaving the buffer empty.
    mutating func takeAll() -> [UInt8] {
        let rest = Array(bytes[start...])
        bytes.removeAll(keepingCapacity: true)
        start = 0
        scanned = 0
        return rest
    }

    /// Calls `body` with the next complete line's bytes, in place (without its `\n`, and without a
    /// `\r` before it), and returns what it returns; nil if there is no complete line yet. Empty
    /// lines are skipped. The bytes are valid only during the call.
    mutating func withNextLine<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R? {
        while let newline = bytes[max(scanned, start)...].firstIndex(of: UInt8(ascii: "\n")) {
            var end = newline
            if end > start, bytes[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            let range = start..<end
            start = newline + 1
            scanned = start
            if !range.isEmpty {
                return try bytes.withUnsafeBytes { try body(UnsafeRawBufferPointer(rebasing: $0[range])) }
            }
        }
        scanned = bytes.count
        if bytes.count - start > maximumLineLength {
            bytes.removeAll()
            start = 0
            scanned = 0
            throw LineTooLong()
        }
        return nil
    }
}
