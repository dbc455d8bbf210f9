import Foundation

/// One client connection of the RPC server: line framing with the 1 MiB limit, output in order
/// (responses, streamed results, notifications), and the event subscription. Owned by
/// ``RPCServer`` until closed. Loop-thread only.
public final class RPCConnection {
    /// The largest message accepted, in bytes.
    public static let maxMessageSize = 1 << 20
    /// A subscriber whose unread output exceeds this is dropped.
    static let maxQueuedOutput = 16 << 20
    /// Answers a client has not read beyond which its further requests wait, unread, until it
    /// reads them: a client that sends requests without reading the answers must not make the
    /// daemon hold them all (a thousand `transfer.list` answers of a megabyte each).
    static let maxUnreadAnswers = 1 << 20
    /// Streamed answers waiting behind one another beyond which requests wait in the same way.
    static let maxQueuedStreams = 16
    /// Requests handled from one read before their answers are sent and the backlog looked at.
    static let requestsPerRound = 64

    /// A number naming the connection for its lifetime (batches belong to one connection).
    public let number: Int
    private let pipe: PipeStream
    private unowned let server: RPCServer
    private var buffer: [UInt8] = []
    private var scanned = 0
    private var discarding = false
    /// Whether the connection was closed (by either side).
    public private(set) var closed = false
    /// Whether `events.subscribe` was called.
    public var subscribed = false
    /// The jobs the subscription is about; nil means all jobs.
    public var subscribedIds: Set<Int64>?
    /// Whether the subscription tells of new jobs (`added`, true unless declined).
    public var subscribedToAdded = true

    /// Output waiting behind a streamed result or an answer not given yet (written in order once
    /// it ends).
    private enum Output {
        case bytes([UInt8])
        case stream(head: [UInt8], RPCResultStream)
        /// An answer given later, made into its line by `line` (the response's id is in it).
        case later(RPCDeferredAnswer, line: (Result<RPCReply, RPCError>) -> [UInt8]?)
    }
    private var queue: [Output] = []
    private var queuedBytes = 0
    private var streaming: RPCResultStream?
    /// The answer not given yet that the output waits for.
    private var awaiting: RPCDeferredAnswer?
    /// Whether output is held: a stream being written or an answer not given yet.
    private var holding: Bool { streaming != nil || awaiting != nil }

    init(server: RPCServer, pipe: PipeStream, number: Int) {
        self.server = server
        self.pipe = pipe
        self.number = number
        pipe.onRead = { [unowned self] bytes in self.received(bytes) }
        pipe.onEnd = { [unowned self] in self.close() }
        pipe.onEndOfInput = { [unowned self] in self.inputEnded() }
    }

    func startReading() { pipe.startReading() }

    // MARK: - Input

    private func received(_ bytes: UnsafeRawBufferPointer) {
        buffer.append(contentsOf: bytes)
        handleInput()
    }

    /// Whether this client has more answers waiting than it should before it reads them.
    private var backlogged: Bool {
        pipe.writeQueueSize + queuedBytes > Self.maxUnreadAnswers || queue.count > Self.maxQueuedStreams
    }

    /// Handles the buffered requests, a round of ``requestsPerRound`` at a time with its answers
    /// sent after each; while the client is ``backlogged`` the rest wait and its socket is not
    /// read (``outputTaken()`` goes on once it has read). While a request's answer is given later
    /// (``holdInput()``), the requests after it wait the same way: each is decided after the one
    /// before it, as the client sent them.
    private func handleInput() {
        while !closed {
            if backlogged || inputHeld {
                pipe.stopReading()
                return
            }
            if !handleLines(upTo: Self.requestsPerRound) && !inputHeld { break }
        }
        if endOfInput { closeIfDone() } else { pipe.startReading() }
    }

    /// Whether the client has closed its sending side (`shutdown(SHUT_WR)`, as `socat` and `nc`
    /// do when their input ends): its requests are all in, and it still reads the answers.
    private var endOfInput = false

    /// The client sent its last byte: a last line without its newline counts as a line; its
    /// requests are handled and the connection closes once every answer is written (never while
    /// it is subscribed: events go on until it closes).
    private func inputEnded() {
        endOfInput = true
        if let last = buffer.last, last != 0x0A { buffer.append(0x0A) }
        handleInput()
    }

    /// Whether answers or events are still to be written (a stopping daemon waits a little for them).
    var hasPendingOutput: Bool {
        !closed && (pipe.writeQueueSize > 0 || !queue.isEmpty || streaming != nil || awaiting != nil)
    }

    /// Closes a connection whose client sent its last request once every answer is written.
    private func closeIfDone() {
        guard endOfInput, !closed, !subscribed, !inputHeld, !backlogged, streaming == nil, awaiting == nil,
            queue.isEmpty, pipe.writeQueueSize == 0, !buffer.contains(0x0A)
        else { return }
        close()
    }

    /// When (loop ms) output last reached the kernel: a stopping daemon waits longer for a client
    /// that keeps reading (``RPCServer/close(flushingFor:then:)``).
    private(set) var lastOutputTakenAt: UInt64 = 0
    /// Bytes written but not yet taken by the kernel, with those queued behind them.
    var unsentBytes: Int { pipe.writeQueueSize + queuedBytes }

    /// Some output reached the kernel: requests held back by a backlog go on if it is gone.
    private func outputTaken() {
        lastOutputTakenAt = server.nowMillis
        if !closed && !pipe.isReading && !backlogged && !inputHeld { handleInput() }
        closeIfDone()
    }

    /// Whether the requests after one whose answer is given later wait for it.
    private var inputHeld = false

    /// The request just handled is answered later: the next ones wait (``resumeInput()``).
    func holdInput() { inputHeld = true }

    /// The answer given later was given: the requests after it go on.
    func resumeInput() {
        inputHeld = false
        if !closed { handleInput() }
    }

    /// Handles up to `limit` complete lines of the buffer, then sends their answers.
    /// - Returns: whether a complete line is still waiting.
    private func handleLines(upTo limit: Int) -> Bool {
        defer { server.endOfInput() }
        var handled = 0
        // Lines are taken from `start` on and the consumed prefix is dropped once at the end: one
        // move of the buffer a read, not one a line (a read of 64 KiB can hold hundreds of lines).
        var start = 0
        defer {
            if start > 0 {
                buffer.removeSubrange(..<start)
                scanned = max(0, scanned - start)
            }
        }
        while !closed {
            if inputHeld { return true }  // the rest wait for the answer given later
            if handled == limit { return buffer[max(start, scanned)...].contains(0x0A) }
            guard let nl = buffer[max(start, scanned)...].firstIndex(of: 0x0A) else {
                scanned = buffer.count
                if buffer.count - start > Self.maxMessageSize && !discarding {
                    discarding = true
                    server.reject(self, RPCError(code: RPCErrorCode.tooLarge, message: "message over 1 MiB"))
                }
                if discarding {
                    buffer.removeAll(keepingCapacity: false)
                    scanned = 0
                    start = 0
                }
                return false
            }
            let line = buffer[start..<nl]
            start = nl + 1
            scanned = start
            if discarding {
                // The tail of an oversized message.
                discarding = false
                continue
            }
            handled += 1
            if line.count > Self.maxMessageSize {
                server.reject(self, RPCError(code: RPCErrorCode.tooLarge, message: "message over 1 MiB"))
                continue
            }
            server.handleLine(Array(line), from: self)
        }
        return false
    }

    // MARK: - Output

    /// Sends one line (`bytes` without its `\n`), after any output queued before it.
    func send(_ bytes: consuming [UInt8]) {
        guard !closed else { return }
        var line = consume bytes  // taken, not copied: a long answer is appended to in place
        line.append(0x0A)
        enqueue(.bytes(line))
    }

    /// Sends a response whose result is streamed: `head` (the response up to its result), the
    /// stream's pieces as each previous piece is flushed, then `}` and the newline.
    func send(head: [UInt8], stream: RPCResultStream) {
        guard !closed else { return }
        enqueue(.stream(head: head, stream))
    }

    /// Sends an answer given later, after any output queued before it; `line` makes its response
    /// line (without the newline) from the outcome, nil for none.
    func send(later answer: RPCDeferredAnswer, line: @escaping (Result<RPCReply, RPCError>) -> [UInt8]?) {
        guard !closed else { return }
        enqueue(.later(answer, line: line))
    }

    /// Sends notifications (whole lines, each ending in `\n`), or drops a subscriber that does
    /// not read its events.
    func notify(lines: [UInt8]) {
        guard !closed else { return }
        if pipe.writeQueueSize + queuedBytes > Self.maxQueuedOutput {
            Log.info("dropping a client that does not read its events")
            close()
            return
        }
        // What happens while a command waits to be decided comes before its answer, as the
        // events of a command answered at once do: ahead of an answer not given yet.
        if let i = queue.firstIndex(where: { if case .later(let a, _) = $0 { a.outcome == nil } else { false } }) {
            queuedBytes += lines.count
            queue.insert(.bytes(lines), at: i)
        } else if awaiting != nil && streaming == nil && queue.isEmpty {
            start(.bytes(lines))
        } else {
            enqueue(.bytes(lines))
        }
    }

    private func enqueue(_ output: Output) {
        if !holding && queue.isEmpty {
            start(output)
        } else {
            if case .bytes(let b) = output { queuedBytes += b.count }
            queue.append(output)
        }
    }

    private func start(_ output: Output) {
        switch output {
        case .bytes(let b):
            pipe.write(b) { [weak self] ok in
                if !ok { self?.close() } else { self?.outputTaken() }
            }
        case .stream(let head, let stream):
            streaming = stream
            var writer = JobJSONWriter(capacity: 512 * 1024)
            writer.raw(head)
            writeNextPiece(stream, writer)
        case .later(let answer, let line):
            if let outcome = answer.outcome { return write(outcome, as: line) }
            awaiting = answer
            answer.whenAnswered { [weak self] outcome in
                guard let self, !self.closed, self.awaiting === answer else { return }
                self.awaiting = nil
                self.write(outcome, as: line)
                self.drainQueue()
            }
        }
    }

    /// Writes an answer given later as its response line.
    private func write(_ outcome: Result<RPCReply, RPCError>, as line: (Result<RPCReply, RPCError>) -> [UInt8]?) {
        guard var bytes = line(outcome) else { return }
        bytes.append(0x0A)
        start(.bytes(bytes))
    }

    private func writeNextPiece(_ stream: RPCResultStream, _ start: JobJSONWriter = JobJSONWriter(capacity: 512 * 1024))
    {
        var writer = start
        let done = stream.writeNext(into: &writer)
        if done {
            writer.key("}\n")
            streaming = nil
            pipe.write(writer.bytes) { [weak self] ok in
                if !ok { self?.close() } else { self?.outputTaken() }
            }
            drainQueue()
            return
        }
        pipe.write(writer.bytes) { [weak self] ok in
            guard let self, !self.closed else { return }
            // A failed write (the peer went away) ends the connection, not just the stream.
            guard ok else { return self.close() }
            self.lastOutputTakenAt = self.server.nowMillis
            self.writeNextPiece(stream)
        }
    }

    private func drainQueue() {
        while !holding, !closed, !queue.isEmpty {
            let output = queue.removeFirst()
            if case .bytes(let b) = output { queuedBytes -= b.count }
            start(output)
        }
    }

    /// Closes the connection; the server forgets it and its batches.
    public func close() {
        guard !closed else { return }
        closed = true
        streaming = nil
        awaiting = nil
        queue = []
        pipe.close()
        server.forget(self)
    }
}
