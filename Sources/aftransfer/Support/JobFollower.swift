import Foundation
import TransferCore

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Follows jobs until they end, for `watch`, `wait` and `--wait`: subscribes to their events,
/// and polls `transfer.get` once a second in case an event is missed (or the daemon has no events).
final class JobFollower {
    /// How often each unfinished job is polled, in seconds.
    static let pollInterval = 1.0
    /// How often the follower wakes up without events (redraws, deadline), in seconds.
    static let tickInterval = 0.2

    private let client: RPCClient
    /// The followed jobs, in the order given, as last heard of.
    private(set) var jobs: [JobSnapshot]
    /// Ids of jobs that were removed while followed.
    private(set) var gone: Set<Int64> = []

    /// Creates a follower for `jobs` (their current objects) over `client`.
    init(client: RPCClient, jobs: [JobSnapshot]) {
        self.client = client
        self.jobs = jobs
    }

    /// Whether every job has ended (or was removed).
    var allEnded: Bool { jobs.allSatisfy { $0.state.isFinal || gone.contains($0.id) } }

    /// Whether every job completed.
    var allCompleted: Bool { jobs.allSatisfy { $0.state == .completed && !gone.contains($0.id) } }

    /// Follows the jobs until all have ended or `timeout` passes.
    /// - Parameters:
    ///   - timeout: seconds to follow at most, or nil for no limit.
    ///   - onUpdate: called after every change and every tick, to draw.
    /// - Returns: true if all jobs ended, false if the timeout passed first.
    func follow(timeout: Double? = nil, onUpdate: (JobFollower) -> Void) throws -> Bool {
        onUpdate(self)
        if allEnded { return true }
        let deadline = timeout.map { Self.now() + $0 }
        do {
            let ids = jobs.map(\.id)
            try client.call(method: RPCMethod.subscribe, params: JSONValue(encoding: SubscribeParams(ids: ids)))
        } catch is RPCError {
            // No events from this daemon: polling alone still works.
        }
        var lastPoll = -Double.infinity
        var ended = false
        try client.streamEvents(tickInterval: Self.tickInterval) { event in
            switch event {
            case .progress(let job):
                // A progress event read before a poll's answer may be older than it.
                if let known = jobs.first(where: { $0.id == job.id }), !known.state.isFinal { record(job) }
            case .state(let job):
                record(job)
            case .notification:
                break
            case .tick:
                if Self.now() - lastPoll >= Self.pollInterval {
                    lastPoll = Self.now()
                    try poll()
                }
            }
            onUpdate(self)
            if allEnded {
                ended = true
                return false
            }
            if let deadline, Self.now() >= deadline { return false }
            return true
        }
        return ended
    }

    private func poll() throws {
        for job in jobs where !job.state.isFinal && !gone.contains(job.id) {
            do {
                let fresh = try client.call(method: RPCMethod.get, params: GetParams(id: job.id), as: JobSnapshot.self)
                record(fresh)
            } catch let error as RPCError where error.code == RPCErrorCode.notFound {
                gone.insert(job.id)
            }
        }
    }

    private func record(_ job: JobSnapshot) {
        guard let index = jobs.firstIndex(where: { $0.id == job.id }) else { return }
        jobs[index] = job
    }

    private static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
