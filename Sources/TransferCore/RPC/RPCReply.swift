import Foundation

/// What a handler answers: a result as JSON bytes, or a result too large to hold at once, written
/// piece by piece (``RPCResultStream``).
public enum RPCReply {
    /// A result already encoded as JSON.
    case json([UInt8])
    /// A result written piece by piece, each piece asked for when the previous one was flushed.
    case stream(RPCResultStream)
    /// An answer given later (``RPCDeferredAnswer``): the answers of the connection's later
    /// requests wait behind it, so answers keep their order.
    case later(RPCDeferredAnswer)

    /// Encodes a result or an error as JSON text: sorted keys (the CLI relies on the order of a
    /// response's keys), slashes as they are (``JSONValueEncoder`` and ``JobJSONWriter/value(_:)``,
    /// which write what `JSONEncoder` with `.sortedKeys, .withoutEscapingSlashes` writes).
    static func json<T: Encodable>(_ value: T) throws -> [UInt8] { try JobJSONWriter.json(value) }

    /// A result encoded as JSON (small results).
    public static func encoding<T: Encodable>(_ value: T) throws -> RPCReply {
        .json(try json(value))
    }

    /// One job object as the result.
    public static func job(_ job: JobSnapshot) -> RPCReply {
        var writer = JobJSONWriter(capacity: 1024)
        writer.write(job)
        return .json(writer.bytes)
    }
}

/// An answer a handler gives once the engine can: a control command on a job whose file is being
/// put in place is decided once that ends (``Engine/control(_:ids:deleteFiles:answer:)``).
/// Loop-thread only.
public final class RPCDeferredAnswer {
    /// The outcome, once given.
    private(set) var outcome: Result<RPCReply, RPCError>?
    /// Who waits for it: the connection's output (to write it) and its input (held until then).
    private var observers: [(Result<RPCReply, RPCError>) -> Void] = []

    /// An answer not given yet.
    public init() {}

    /// Calls `body` with the outcome once it is given (at once if it was), in the order asked.
    func whenAnswered(_ body: @escaping (Result<RPCReply, RPCError>) -> Void) {
        if let outcome { body(outcome) } else { observers.append(body) }
    }

    /// Gives the answer (a JSON result or an error; the first call counts).
    public func answer(_ outcome: Result<RPCReply, RPCError>) {
        guard self.outcome == nil else { return }
        self.outcome = outcome
        let waiting = observers
        observers = []
        for body in waiting { body(outcome) }
    }
}

/// A result written piece by piece, so that a large one (`transfer.list` of 100,000 jobs) never
/// sits in memory at once and other requests are served between its pieces. Loop-thread only.
public protocol RPCResultStream: AnyObject {
    /// Appends the next piece of the result's JSON to `writer`.
    /// - Returns: true when the result is complete.
    func writeNext(into writer: inout JobJSONWriter) -> Bool
}

/// `transfer.list`'s result: a JSON array of the job objects in id order, read a page at a time.
final class JobListStream: RPCResultStream {
    /// Jobs read and written per piece.
    static let pageSize = 500

    private let service: JobService
    private let state: TransferState?
    private var remaining: Int
    private var after: Int64?
    private var written = 0
    private var started = false

    /// A stream of the jobs in `state` (all when nil), at most `limit` (all when nil).
    init(service: JobService, state: TransferState?, limit: Int?) {
        self.service = service
        self.state = state
        self.remaining = limit ?? Int.max
    }

    func writeNext(into writer: inout JobJSONWriter) -> Bool {
        if !started {
            started = true
            writer.key("[")
        }
        let want = min(Self.pageSize, remaining)
        let page = want > 0 ? service.jobs(state: state, after: after, limit: want) : []
        for job in page {
            if written > 0 { writer.key(",") }
            writer.write(job)
            written += 1
        }
        remaining -= page.count
        after = page.last?.id ?? after
        if page.count < want || remaining == 0 {
            writer.key("]")
            return true
        }
        return false
    }
}

/// A result holding jobs already in memory, `{"jobs":[...]}` (`transfer.addMany`), written a page
/// at a time so that the bytes of 100,000 jobs never sit in memory at once.
final class JobArrayStream: RPCResultStream {
    private let jobs: AddedJobs
    private var next = 0

    /// A stream of `jobs` in their order.
    init(jobs: AddedJobs) { self.jobs = jobs }

    func writeNext(into writer: inout JobJSONWriter) -> Bool {
        if next == 0 { writer.key("{\"jobs\":[") }
        let end = min(jobs.count, next + JobListStream.pageSize)
        for i in next..<end {
            if i > 0 { writer.key(",") }
            writer.write(jobs[i])
        }
        next = end
        if next == jobs.count {
            writer.key("]}")
            return true
        }
        return false
    }
}

/// `{"jobs":[...]}` of jobs just queued with consecutive ids (a batch sent in parts), read from the
/// store a page at a time: the batch's jobs are never all in memory at once. A job removed before
/// its page was read is `null` in its place, so that every later job keeps its request's index
/// (they shifted, found by an outside audit).
final class JobRangeStream: RPCResultStream {
    private let service: JobService
    private let ids: ClosedRange<Int64>
    private var after: Int64
    /// The id whose element is written next.
    private var next: Int64
    private var started = false

    /// A stream of the jobs with ids in `ids`, in id order.
    init(service: JobService, ids: ClosedRange<Int64>) {
        self.service = service
        self.ids = ids
        self.after = ids.lowerBound - 1
        self.next = ids.lowerBound
    }

    private func element(_ writer: inout JobJSONWriter) {
        if next > ids.lowerBound { writer.key(",") }
        next += 1
    }

    func writeNext(into writer: inout JobJSONWriter) -> Bool {
        if !started {
            started = true
            writer.key("{\"jobs\":[")
        }
        let want = Int(min(Int64(JobListStream.pageSize), ids.upperBound - after))
        let page = want > 0 ? service.jobs(state: nil, after: after, limit: want) : []
        for job in page where job.id <= ids.upperBound {
            while next < job.id {
                element(&writer)
                writer.key("null")
            }
            element(&writer)
            writer.write(job)
        }
        if let last = page.last, page.count == want, last.id < ids.upperBound {
            after = last.id
            return false
        }
        while next <= ids.upperBound {
            element(&writer)
            writer.key("null")
        }
        writer.key("]}")
        return true
    }
}
