import Foundation
import TransferCore

/// Queues the requests of `download` and `upload`, all or nothing, and reports them as asked:
/// ids (or job objects with `--json`) on stdout, then with `--wait` progress on stderr and the
/// outcome as the exit status.
struct Submission {
    /// One request and where it came from, for messages (`urls.txt line 3`), or nil for the
    /// command line.
    struct Item {
        var origin: String?
        var request: TransferRequest
    }

    var items: [Item]
    var options: TransferOptions
    var global: GlobalOptions

    /// Validates every request before anything is queued, then queues them in order.
    /// - Throws: ``CLIFailure`` (exit 2) naming the first refused item; nothing stays queued.
    func run() throws {
        // Checked here first too, so that refused input does not start a daemon.
        for item in items {
            do {
                _ = try RequestValidator.validate(item.request)
            } catch let error as RPCError {
                throw CLIFailure.usage(Self.prefix(item.origin) + error.message)
            }
        }
        let client = try global.connect()
        var added: [JSONValue] = []
        var jobs: [JobSnapshot] = []
        for item in items {
            do {
                let value = try client.call(method: RPCMethod.add, params: JSONValue(encoding: item.request))
                added.append(value)
                jobs.append(try value.decode(as: JobSnapshot.self))
            } catch let error as RPCError {
                Self.rollBack(jobs.map(\.id), client: client)
                throw CLIFailure(error.exitStatus, Self.prefix(item.origin) + error.message)
            } catch {
                Self.rollBack(jobs.map(\.id), client: client)
                throw error
            }
        }

        if !options.wait {
            if options.json {
                try JSONOutput.print(items.count == 1 && items[0].origin == nil ? added[0] : .array(added))
            } else {
                Console.out(jobs.map { String($0.id) }.joined(separator: "\n"))
            }
            return
        }

        if !options.json { Console.out(jobs.map { String($0.id) }.joined(separator: "\n")) }
        let follower = JobFollower(client: client, jobs: jobs)
        let renderer = ProgressRenderer(stream: .stderr, showNames: jobs.count > 1)
        do {
            _ = try follower.follow { renderer.update($0.jobs, gone: $0.gone) }
        } catch {
            renderer.abandon()
            throw error
        }
        renderer.finish(follower.jobs, gone: follower.gone)
        if options.json {
            // The daemon's own objects, so that every field it sends reaches the script.
            let finalObjects = try follower.jobs.map { job in
                let fresh = try? client.call(method: RPCMethod.get, params: JSONValue(encoding: GetParams(id: job.id)))
                return try fresh ?? JSONValue(encoding: job)
            }
            try JSONOutput.print(items.count == 1 && items[0].origin == nil ? finalObjects[0] : .array(finalObjects))
        }
        if !follower.allCompleted { throw CLIFailure(CLIFailure.jobFailed) }
    }

    /// Removes jobs queued before a later one was refused, so that a list is all or nothing.
    private static func rollBack(_ ids: [Int64], client: RPCClient) {
        guard !ids.isEmpty else { return }
        _ = try? client.call(method: RPCMethod.remove, params: JSONValue(encoding: ControlParams(ids: ids)))
    }

    private static func prefix(_ origin: String?) -> String {
        origin.map { $0 + ": " } ?? ""
    }
}
