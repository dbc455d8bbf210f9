import Foundation
import TransferBase

/// Queues the requests of `download` and `upload` and reports them as asked: ids (or job objects
/// with `--json`) on stdout, then with `--wait` progress on stderr and the outcome as the exit
/// status. A single request goes by `transfer.add`; a list by `transfer.addMany`, which queues all
/// of it or nothing (the daemon decides).
struct Submission {
    /// One request and where it came from, for messages (`urls.txt line 3`), or nil for the
    /// command line.
    struct Item {
        /// Where the request came from, for messages, or nil for the command line.
        var origin: String?
        /// Its line in the list (`-i`), or nil for the command line.
        var line: Int? = nil
        /// The request.
        var request: TransferRequest
    }

    /// The requests, in order (a list's lines, or the one of the command line).
    var items: [Item]
    /// How to report the new jobs.
    var options: TransferOptions
    /// Where the daemon is.
    var global: GlobalOptions

    /// Whether the requests come from a list (`-i`): sent by `transfer.addMany`, printed as a list.
    var isList: Bool { items.count != 1 || items[0].origin != nil }

    /// Validates every request before the daemon is contacted, then queues them.
    /// - Throws: ``CLIFailure`` (exit 2) naming the first refused item; nothing is queued then.
    func run() throws {
        // Checked here first too, so that refused input does not start a daemon. A list's
        // directory is looked at once, not once a line.
        var directories = Set<String>()
        for item in items {
            do {
                // Without a reader of certificates: the CLI links no TLS library (the daemon reads them).
                _ = try RequestValidator.validate(item.request, knownDirectories: &directories, certificates: nil)
            } catch {
                throw CLIFailure.usage(RefusalWording.message(Self.message(of: error), origin: item.origin))
            }
        }
        let client = try global.connect()
        // With --wait, subscribe before queuing: no event of the new jobs can be missed, so the
        // follower need not ask for each job to catch up (thousands of requests for a long list).
        // Not to their creation: the answer brings the new jobs.
        let subscribed =
            options.wait
            && (try? client.call(
                method: RPCMethod.eventsSubscribe.rawValue, params: .some(.object(["added": .bool(false)])))) != nil
        var added: [JSONValue] = []
        // The new jobs when the answer was read straight into job objects (nil for a job removed
        // before its object was written).
        var followed: [JobSnapshot?]?
        let ids: [Int64]
        do {
            if isList && !options.json && !options.wait {
                // Only the ids are printed: read them as the result arrives, without decoding it.
                let ids = try addMany(client: client, as: .ids).ids
                Console.out(ids.map(String.init).joined(separator: "\n"))
                return
            }
            if isList && !options.json {
                // Followed, not printed: read straight into job objects, not into a tree of
                // thousands (unless the answer is the tree's to read: then as below).
                let answer = try addMany(client: client, as: .snapshots)
                if let jobs = answer.snapshots {
                    followed = jobs
                    ids = JobIdScanner.filled(jobs.map { $0?.id ?? 0 })
                } else {
                    (added, ids) = answer.both
                }
            } else if isList {
                (added, ids) = try addMany(client: client, as: .objects).both
            } else {
                // `.some`: the untyped call, not the generic one that would re-encode the result.
                let params = try JSONValue(encoding: items[0].request)
                added = [try client.call(method: RPCMethod.transferAdd.rawValue, params: .some(params))]
                ids = try Self.ids(of: added)
            }
        } catch let error as RPCError {
            throw CLIFailure(error.exitStatus, message(of: error))
        }
        if !options.json { Console.out(ids.map(String.init).joined(separator: "\n")) }
        if !options.wait {
            if options.json { try JSONOutput.print(isList ? .array(added) : added[0]) }
            return
        }

        // A job removed before its object was written (`null`) is not followed: it did not complete.
        let jobs: [JobSnapshot]
        let removedEarly: Int
        if let followed {
            jobs = followed.compactMap { $0 }
            removedEarly = followed.count - jobs.count
        } else {
            // Decoded once as a whole: one decoder for thousands of jobs, not one each.
            jobs = try JSONValue.array(added.filter { $0 != .null }).decode(as: [JobSnapshot].self)
            removedEarly = added.count - jobs.count
        }
        let follower = JobFollower(client: client, jobs: jobs, subscribed: subscribed)
        if Console.Stream.stderr.isTerminal { Console.endLineOnInterrupt(.stderr) }
        try follower.follow(drawingOn: ProgressRenderer(stream: .stderr, showNames: jobs.count > 1))
        if options.json {
            // The daemon's own objects, so that every field it sends reaches the script.
            let finalObjects = try follower.jobs.map { job in
                let fresh = try? client.call(
                    method: RPCMethod.transferGet.rawValue, params: JSONValue(encoding: GetParams(id: job.id)))
                return try fresh ?? JSONValue(encoding: job)
            }
            try JSONOutput.print(isList ? .array(finalObjects) : finalObjects[0])
        }
        if removedEarly > 0 {
            throw CLIFailure(CLIFailure.jobFailed, "\(removedEarly) of the jobs were removed before they were reported")
        }
        if !follower.allCompleted { throw CLIFailure(CLIFailure.jobFailed) }
    }

    /// What `transfer.addMany` answered, read as ``Reading`` says.
    private struct Added {
        var jobs: [JSONValue] = []
        var ids: [Int64] = []
        /// The jobs read straight into job objects (``Reading/snapshots``), when they could be.
        var snapshots: [JobSnapshot?]?
        var both: ([JSONValue], [Int64]) { (jobs, ids) }
    }

    /// How to read `transfer.addMany`'s answer.
    private enum Reading {
        /// Only the ids, as they arrive (``Added/ids``).
        case ids
        /// The job objects as JSON values, to print (``Added/jobs`` and ``Added/ids``).
        case objects
        /// Straight into job objects, to follow (``Added/snapshots``; nil for `null`); as
        /// ``objects`` when the answer is the tree's to read.
        case snapshots
    }

    /// Queues every item with `transfer.addMany`: in one message when it fits, else in parts of
    /// one batch on this connection (``BatchSplitter``).
    /// - Returns: the new jobs, in the items' order, read as `reading` says.
    private func addMany(client: RPCClient, as reading: Reading) throws -> Added {
        // Each request is written as JSON text once: measured for the plan, then copied into its part.
        let encoded = items.map { BatchSplitter.encode($0.request) }
        let overheads = try BatchSplitter.overheads()
        let ranges: [Range<Int>]
        let batch: String?
        do {
            switch try BatchSplitter().plan(
                sizes: encoded.map(\.count), singleOverhead: overheads.single, partOverhead: overheads.part)
            {
            case .single:
                ranges = [0..<items.count]
                batch = nil
            case .parts(let parts):
                ranges = parts
                batch = BatchSplitter.newBatchID()
            }
        } catch let error as BatchSplitter.RequestTooLarge {
            throw CLIFailure.usage(
                Self.prefix(items[error.index].origin) + "the request is too large (\(error.size) bytes encoded)")
        }
        // Every part goes out before any answer is read, so that the daemon checks one part while
        // this process writes the next. A refused part drops the batch and the daemon refuses the
        // parts after it, so the first error read is the one to report.
        let method = BatchSplitter.method
        var posted: [Int64] = []
        for (number, range) in ranges.enumerated() {
            let final = number == ranges.count - 1
            let params = BatchSplitter.params(batch: batch, final: final, requests: encoded[range])
            posted.append(try client.post(method: method, params: params))
        }
        for (number, id) in zip(posted.indices, posted).dropLast() {
            let answer = try client.response(to: id, method: method)
            if answer["received"] != .int(Int64(ranges[number].upperBound)) {
                throw ClientError.protocolViolation(
                    "a \(method) part acknowledged as \(answer["received"].map { "\($0)" } ?? "nothing"), not \(ranges[number].upperBound) requests"
                )
            }
        }
        guard let last = posted.last else { return Added() }
        let result: JSONValue
        if reading == .snapshots {
            switch try client.jobsResponse(to: last, method: method) {
            case .jobs(let jobs):
                guard jobs.count == items.count else {
                    throw ClientError.protocolViolation("a \(method) result without one job per request")
                }
                return Added(snapshots: jobs)
            case .result(let value):
                result = value
            }
        } else if reading == .ids {
            // Read as it arrives: only the ids, without decoding 100,000 job objects.
            var scanner = JobIdScanner()
            switch try client.streamResult(of: last, method: method, into: { scanner.feed($0) }) {
            case .decoded(let value):
                result = value
            case .streamed:
                guard let ids = scanner.ids, ids.count == items.count else {
                    throw ClientError.protocolViolation("a \(method) result without one job per request")
                }
                return Added(ids: ids)
            }
        } else {
            result = try client.response(to: last, method: method)
        }
        guard case .array(let jobs)? = result["jobs"], jobs.count == items.count else {
            throw ClientError.protocolViolation("a \(method) result without one job per request")
        }
        return Added(jobs: jobs, ids: try Self.ids(of: jobs))
    }

    /// The ids of the new jobs' objects; a `null` (a job removed before its object was written)
    /// gets the id its place implies (``JobIdScanner/filled(_:)``).
    private static func ids(of jobs: [JSONValue]) throws -> [Int64] {
        JobIdScanner.filled(
            try jobs.map { job in
                if job == .null { return 0 }
                guard case .int(let id)? = job["id"] else {
                    throw ClientError.protocolViolation("a job object without an id")
                }
                return id
            })
    }

    /// A refusal's message for people: the item it names first (`urls.txt line 3: `), in place
    /// of the daemon's `request N: ` (the index only a script would need).
    private func message(of error: RPCError) -> String {
        guard let origin = origin(of: error), case .int(let index)? = error.data?["index"] else {
            return RefusalWording(error.message).text
        }
        let daemonPrefix = "request \(index): "
        var text =
            error.message.hasPrefix(daemonPrefix) ? String(error.message.dropFirst(daemonPrefix.count)) : error.message
        // A clash with an earlier request of the list names its line, as the list's own check does.
        let earlierMarker = " is also the file of request "
        if let marker = text.range(of: earlierMarker), let earlier = Int(text[marker.upperBound...]),
            earlier >= 0, earlier < items.count, let line = items[earlier].line
        {
            text = text[..<marker.lowerBound] + " is also the file of line \(line)"
        }
        return RefusalWording.message(text, origin: origin)
    }

    /// The item a refusal names (`data.index`, counted from 0 across the whole batch), or nil.
    private func origin(of error: RPCError) -> String? {
        guard case .int(let index)? = error.data?["index"], index >= 0, index < items.count else { return nil }
        return items[Int(index)].origin
    }

    /// The message of a refusal, whichever error type the library threw it as.
    static func message(of error: Error) -> String {
        switch error {
        case let error as TransferError: return error.message
        case let error as RPCError: return error.message
        case let error as CLIFailure: return error.message ?? "refused"
        default: return "\(error)"
        }
    }

    private static func prefix(_ origin: String?) -> String {
        origin.map { $0 + ": " } ?? ""
    }
}
