import Foundation

/// Holds the parts of `transfer.addMany` batches until their final part (SPEC "Scale"). Each part
/// is checked as it arrives; nothing is queued before the final part; a refused request, a closed
/// connection or ``timeout`` seconds without a part drops the whole batch, and a later part of a
/// dropped batch is refused. Loop-thread only.
public final class BatchAssembler {
    /// Seconds without a part after which a batch is dropped.
    public static let timeout: Double = 60

    /// A batch: the connection it arrives on and its id.
    public struct Key: Hashable, Sendable {
        /// The connection's number (``RPCConnection/number``).
        public var owner: Int
        /// The batch id the client chose.
        public var batch: String
    }

    /// What a part leads to.
    public enum Outcome: Equatable {
        /// The part was held; the batch has `received` requests so far.
        case partial(received: Int)
        /// The final part arrived: every request of the batch, in order, to queue now.
        case complete([TransferRequest])
    }

    private struct Pending {
        var requests: [TransferRequest] = []
        /// Download destinations (normalized) and the index of the request that named each.
        var destinations: [String: Int] = [:]
        var lastPartAt: Double
    }

    private var pending: [Key: Pending] = [:]
    /// Batches dropped (refused or idle) whose connection is still open: their later parts are refused.
    private var dropped: Set<Key> = []
    private let clock: () -> Double

    /// Creates an assembler; `clock` gives seconds (monotonic by default; tests pass their own).
    public init(clock: @escaping () -> Double = BatchAssembler.monotonicSeconds) {
        self.clock = clock
    }

    /// Seconds of the monotonic clock.
    public static func monotonicSeconds() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }

    /// Number of batches waiting for parts.
    public var count: Int { pending.count }

    /// Takes one part of a batch.
    /// - Parameters:
    ///   - owner: the connection's number.
    ///   - batch: the batch id.
    ///   - requests: the part's requests.
    ///   - final: whether this is the last part.
    ///   - check: checks one request as `transfer.add` would, without queuing it, and returns it
    ///     validated (``JobService/prevalidate(_:)``); throws ``TransferError``. The batch holds the
    ///     validated requests, so the final part need not validate them again.
    /// - Returns: how many requests the batch holds, or, for the final part, all of them.
    /// - Throws: ``BatchRefusal`` (index counted from the batch's first request) when a request is
    ///   refused or names a destination an earlier request of the batch names; the batch is dropped.
    ///   ``RPCError`` for a part of a batch already dropped.
    public func receive(
        owner: Int, batch: String, requests: [TransferRequest], final: Bool,
        check: (TransferRequest) throws -> TransferRequest
    ) throws -> Outcome {
        let key = Key(owner: owner, batch: batch)
        if dropped.contains(key) {
            throw RPCError.invalidParams(
                "batch \(batch) was dropped (a refused request or \(Int(Self.timeout)) s without a part); send the list again"
            )
        }
        var entry = pending.removeValue(forKey: key) ?? Pending(lastPartAt: clock())
        do {
            try Self.add(requests, to: &entry.requests, destinations: &entry.destinations, check: check)
        } catch {
            dropped.insert(key)
            throw error
        }
        if final { return .complete(entry.requests) }
        entry.lastPartAt = clock()
        pending[key] = entry
        return .partial(received: entry.requests.count)
    }

    /// Checks a whole list sent in one message: no two requests download to the same destination.
    /// - Throws: ``BatchRefusal`` naming the later request of a clash.
    public static func checkDistinctDestinations(_ requests: [TransferRequest]) throws {
        var held: [TransferRequest] = []
        var destinations: [String: Int] = [:]
        try add(requests, to: &held, destinations: &destinations, check: { $0 })
    }

    private static func add(
        _ requests: [TransferRequest], to held: inout [TransferRequest], destinations: inout [String: Int],
        check: (TransferRequest) throws -> TransferRequest
    ) throws {
        for request in requests {
            let index = held.count
            if (request.kind ?? "download").lowercased() == "download", let destination = request.destination {
                let normalized = (destination as NSString).standardizingPath
                if let earlier = destinations[normalized] {
                    throw BatchRefusal(
                        index: index,
                        error: TransferError(
                            .destinationExists,
                            "destination: \(destination) is also the destination of request \(earlier)"))
                }
                destinations[normalized] = index
            }
            do {
                held.append(try check(request))
            } catch let error as TransferError {
                throw BatchRefusal(index: index, error: error)
            }
        }
    }

    /// Drops every batch of a closed connection.
    public func drop(owner: Int) {
        pending = pending.filter { $0.key.owner != owner }
        dropped = dropped.filter { $0.owner != owner }
    }

    /// Drops batches without a part for ``timeout`` seconds.
    /// - Returns: the batches dropped.
    @discardableResult
    public func expire() -> [Key] {
        let now = clock()
        let idle = pending.filter { now - $0.value.lastPartAt >= Self.timeout }.map(\.key)
        for key in idle {
            pending[key] = nil
            dropped.insert(key)
        }
        return idle
    }
}
