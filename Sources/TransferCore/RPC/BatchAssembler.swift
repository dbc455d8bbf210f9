import Foundation

/// Follows the parts of `transfer.addMany` batches until their final part (SPEC "Scale"). Each part
/// is checked as it arrives and its rows are handed over to be held (outside memory: the store's
/// staging table); nothing is queued before the final part; a refused request, a closed connection
/// or ``timeout`` seconds without a part drops the whole batch (and its held rows), and a later
/// part of a dropped batch is refused. Loop-thread only.
public final class BatchAssembler {
    /// Seconds without a part after which a batch is dropped.
    public static let timeout: Double = 60

    /// A batch: the connection it arrives on and its id.
    public struct Key: Hashable, Sendable {
        /// The connection's number (``RPCConnection/number``).
        public var owner: Int
        /// The batch id the client chose.
        public var batch: String
        /// The batch's name where its rows are held: unique among the connections.
        public var storeKey: String { "\(owner):\(batch)" }
    }

    /// What a part leads to.
    public enum Outcome: Equatable {
        /// The part was held; the batch has `received` requests so far.
        case partial(received: Int)
        /// The final part arrived: the batch is complete, its rows are held (``Complete``).
        case complete(Complete)
    }

    /// A complete batch: what the final step needs to check and queue it.
    public struct Complete: Equatable {
        /// The batch, whose rows were handed to `stage` part by part.
        public var key: Key
        /// How many requests it has.
        public var count: Int
        /// Each download destination the batch names, with the index of the request that names it
        /// and whether that request may replace an existing file: checked again against the jobs
        /// queued since, when the batch is queued.
        public var destinations: [String: Claim]
    }

    /// A destination a batch's request names.
    public struct Claim: Equatable, Sendable {
        /// The request's index in the batch.
        public var index: Int
        /// Whether the request replaces an existing file (`--replace`).
        public var replace: Bool
    }

    private struct Pending {
        var count = 0
        var destinations: [String: Claim] = [:]
        var lastPartAt: Double
    }

    private var pending: [Key: Pending] = [:]
    /// Batches dropped (refused or idle) whose connection is still open: their later parts are refused.
    private var dropped: Set<Key> = []
    private let clock: () -> Double
    /// Forgets the rows held for a dropped batch.
    private let discard: (Key) -> Void

    /// Creates an assembler.
    /// - Parameters:
    ///   - clock: seconds (monotonic by default; tests pass their own).
    ///   - discard: forgets the rows held for a batch that is dropped (``JobService/discardStaged(batch:)``).
    public init(clock: @escaping () -> Double = BatchAssembler.monotonicSeconds, discard: @escaping (Key) -> Void) {
        self.clock = clock
        self.discard = discard
    }

    /// Seconds of the monotonic clock.
    public static func monotonicSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Number of batches waiting for parts.
    public var count: Int { pending.count }

    /// Takes one part of a batch: checks each request and hands the part's new rows to `stage`,
    /// which holds them outside memory until the final part.
    /// - Parameters:
    ///   - owner: the connection's number.
    ///   - batch: the batch id.
    ///   - requests: the part's requests, as they decoded: one that did not is refused by its
    ///     index, as one that does not validate is.
    ///   - final: whether this is the last part.
    ///   - prepare: checks one request as `transfer.add` would, without queuing it, and returns the
    ///     new job's row (``JobService/prepare(_:)``); throws ``TransferError``.
    ///   - stage: holds a part's rows for the batch (``JobService/stage(_:batch:)``).
    /// - Returns: how many requests the batch holds, or, for the final part, the complete batch.
    /// - Throws: ``BatchRefusal`` (index counted from the batch's first request) when a request is
    ///   refused or names a destination an earlier request of the batch names; the batch is dropped.
    ///   ``RPCError`` for a part of a batch already dropped; what `stage` throws (the batch is dropped).
    public func receive(
        owner: Int, batch: String, decoded requests: [Result<TransferRequest, TransferError>], final: Bool,
        prepare: (TransferRequest) throws -> JobRecord, stage: ([JobRecord], Key) throws -> Void
    ) throws -> Outcome {
        let key = Key(owner: owner, batch: batch)
        if dropped.contains(key) {
            throw RPCError.invalidParams(
                "batch \(batch) was dropped (a refused request, a line of the connection that was not a request, or \(Int(Self.timeout)) s without a part); send the list again"
            )
        }
        var entry = pending.removeValue(forKey: key) ?? Pending(lastPartAt: clock())
        do {
            var records: [JobRecord] = []
            records.reserveCapacity(requests.count)
            for decoded in requests {
                let index = entry.count
                let request = try decoded.mapError { BatchRefusal(index: index, error: $0) }.get()
                records.append(
                    try Self.check(request, index: entry.count, claims: &entry.destinations, prepare: prepare))
                entry.count += 1
            }
            try stage(records, key)
        } catch {
            dropped.insert(key)
            discard(key)
            throw error
        }
        if final { return .complete(Complete(key: key, count: entry.count, destinations: entry.destinations)) }
        entry.lastPartAt = clock()
        pending[key] = entry
        return .partial(received: entry.count)
    }

    /// The first refusal among a list's requests before `end`, checked in order as a batch's parts
    /// are (decoded, destination claimed, prepared), or nil: a list sent in one message is checked
    /// in passes (decoding, clashes, then each request), and a refusal one of them finds at `end`
    /// must not hide an earlier request's (SPEC: the index of the *first* refused request).
    public static func firstRefusal(
        in requests: [Result<TransferRequest, TransferError>], before end: Int,
        prepare: (TransferRequest) throws -> JobRecord
    ) -> BatchRefusal? {
        var claims: [String: Claim] = [:]
        for (index, decoded) in requests.prefix(end).enumerated() {
            do {
                let request = try decoded.mapError { BatchRefusal(index: index, error: $0) }.get()
                _ = try check(request, index: index, claims: &claims, prepare: prepare)
            } catch let refusal as BatchRefusal {
                return refusal
            } catch {
                return nil  // not a request's refusal (the store): the pass's own error stands
            }
        }
        return nil
    }

    /// Checks a whole list sent in one message: no two requests download to the same destination.
    /// - Throws: ``BatchRefusal`` naming the later request of a clash.
    public static func checkDistinctDestinations(_ requests: [TransferRequest]) throws {
        var claims: [String: Claim] = [:]
        for (index, request) in requests.enumerated() {
            try claim(heldPath(of: request), of: request, index: index, in: &claims)
        }
    }

    /// Prepares request `index` of a batch and claims its destination.
    private static func check(
        _ request: TransferRequest, index: Int, claims: inout [String: Claim],
        prepare: (TransferRequest) throws -> JobRecord
    ) throws -> JobRecord {
        // The destination as given is claimed first: a clash names the request as `transfer.add`
        // would, before anything about it is checked.
        try claim(heldPath(of: request), of: request, index: index, in: &claims)
        let record: JobRecord
        do {
            record = try prepare(request)
        } catch let error as TransferError {
            throw BatchRefusal(index: index, error: error)
        }
        if record.kind == .download, record.destination != request.destination {  // a directory and the URL's name
            try claim(record.destination, of: request, index: index, in: &claims)
        }
        return record
    }

    /// Whether a request (not yet validated: its kind as given) is a download.
    private static func isDownload(_ request: TransferRequest) -> Bool {
        (request.kind ?? "download").lowercased() == "download"
    }

    /// The path a request holds: a download's destination, an upload's `--response` file.
    private static func heldPath(of request: TransferRequest) -> String? {
        isDownload(request) ? request.destination : request.response
    }

    private static func claim(
        _ destination: String?, of request: TransferRequest, index: Int, in claims: inout [String: Claim]
    ) throws {
        guard let destination else { return }
        let normalized = (destination as NSString).standardizingPath
        if let earlier = claims[normalized], earlier.index != index {
            throw BatchRefusal(
                index: index,
                error: Destination.heldByEarlierRequest(
                    destination, download: isDownload(request), earlier: earlier.index))
        }
        claims[normalized] = Claim(index: index, replace: request.replace == true)
    }

    /// Drops the batches a connection is sending when one of its lines was lost (not JSON, over
    /// 1 MiB, not a request): it may have been one of their parts, and a batch missing a part must
    /// not be queued. Their later parts are refused.
    /// - Returns: the batches dropped.
    @discardableResult
    public func dropOpen(owner: Int) -> [Key] {
        let open = pending.keys.filter { $0.owner == owner }
        for key in open { dropPending(key) }
        return open
    }

    /// Drops a batch one of whose parts was refused before its requests were read (its params
    /// did not decode: an unknown member, `final` or `requests` of the wrong type): the part may
    /// have held requests of the list, which must not be queued without them. Its later parts are
    /// refused, as after any refused part.
    public func refusePart(owner: Int, batch: String) {
        let key = Key(owner: owner, batch: batch)
        if pending[key] != nil { dropPending(key) } else { dropped.insert(key) }
    }

    /// Drops every batch of a closed connection.
    public func drop(owner: Int) {
        for key in pending.keys where key.owner == owner { discard(key) }
        pending = pending.filter { $0.key.owner != owner }
        dropped = dropped.filter { $0.owner != owner }
    }

    /// Drops batches without a part for ``timeout`` seconds.
    /// - Returns: the batches dropped.
    @discardableResult
    public func expire() -> [Key] {
        let now = clock()
        let idle = pending.filter { now - $0.value.lastPartAt >= Self.timeout }.map(\.key)
        for key in idle { dropPending(key) }
        return idle
    }

    /// Drops a batch still waiting for parts: its held rows are forgotten, its later parts refused.
    private func dropPending(_ key: Key) {
        pending[key] = nil
        dropped.insert(key)
        discard(key)
    }
}
