import Foundation
import TransferBase

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Follows jobs until they end, for `watch`, `wait` and `--wait`: subscribes to their events,
/// and polls `transfer.get` in case an event is missed (or the daemon has no events): every job once
/// after subscribing, then only jobs not heard of for a while, a bounded number a second.
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
    /// Each job's place in ``jobs``.
    private var index: [Int64: Int] = [:]
    /// When each job was last heard of (monotonic seconds).
    private var heard: [Int64: Double] = [:]
    /// Whether every job was asked for once after subscribing (closing the window in which an
    /// event could be missed).
    private var caughtUp = false

    /// Whether `client` subscribed to every job's events before these jobs were queued.
    private let subscribedBefore: Bool
    /// Whether a job not followed yet that an event shows unfinished joins the followed ones
    /// (`watch` without ids: the whole queue, jobs queued later included).
    private let followsNewJobs: Bool

    /// Creates a follower for `jobs` (their current objects) over `client`; `subscribed` when the
    /// client subscribed to all events before the jobs were queued (nothing to catch up on).
    /// With `followsNewJobs`, `client` must have subscribed to every job's events (`subscribed`).
    init(client: RPCClient, jobs: [JobSnapshot], subscribed: Bool = false, followsNewJobs: Bool = false) {
        self.client = client
        self.jobs = jobs
        self.subscribedBefore = subscribed
        self.followsNewJobs = followsNewJobs
        caughtUp = subscribed
        let now = Self.now()
        for (i, job) in jobs.enumerated() {
            index[job.id] = i
            heard[job.id] = now
        }
        open = jobs.filter { !$0.state.isFinal }.count
    }

    /// How many jobs have not ended (and were not removed).
    private var open = 0

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
        if !subscribedBefore {
            do {
                let ids = jobs.map(\.id)
                try client.call(
                    method: RPCMethod.eventsSubscribe.rawValue, params: JSONValue(encoding: SubscribeParams(ids: ids)))
            } catch is RPCError {
                // No events from this daemon: polling alone still works.
            }
        }
        var lastPoll = -Double.infinity
        var ended = false
        // Following many jobs, drawing (and checking whether all ended) after every event would
        // cost O(jobs) per event: then it happens on ticks and when a job ends, at most 10 a second.
        let many = jobs.count > Self.manyJobs
        var lastUpdate = -Double.infinity
        try client.streamEvents(tickInterval: Self.tickInterval) { event in
            switch event {
            case .progress(let job):
                // A progress event read before a poll's answer may be older than it.
                if index[job.id].map({ !jobs[$0].state.isFinal }) ?? true { record(job) }
            case .state(let job):
                record(job)
            case .removed(let job):
                removed(job.id)
            case .notification:
                break
            case .tick:
                if Self.now() - lastPoll >= Self.pollInterval {
                    lastPoll = Self.now()
                    try poll()
                }
            }
            if many && open > 0 && Self.now() - lastUpdate < Self.minimumUpdateInterval { return true }
            lastUpdate = Self.now()
            onUpdate(self)
            if open == 0 {
                ended = true
                return false
            }
            if let deadline, Self.now() >= deadline { return false }
            return true
        }
        return ended
    }

    private func poll() throws {
        let now = Self.now()
        var asked = 0
        for job in jobs where !job.state.isFinal && !gone.contains(job.id) {
            if caughtUp && now - (heard[job.id] ?? 0) < Self.quietInterval { continue }
            if caughtUp && asked >= Self.pollBatch { break }
            asked += 1
            do {
                let fresh = try client.call(
                    method: RPCMethod.transferGet.rawValue, params: GetParams(id: job.id), as: JobSnapshot.self)
                record(fresh)
            } catch let error as RPCError where error.code == RPCErrorCode.notFound {
                removed(job.id)
            }
        }
        caughtUp = true
    }

    /// Above this many jobs, updates are drawn at most every ``minimumUpdateInterval``.
    static let manyJobs = 50
    /// Seconds between updates when following many jobs.
    static let minimumUpdateInterval = 0.1

    /// Seconds without news of a job before a poll asks for it again.
    static let quietInterval = 5.0
    /// The most jobs one poll asks for once caught up.
    static let pollBatch = 64

    private func record(_ job: JobSnapshot) {
        guard let i = index[job.id] else { return join(job) }
        if !jobs[i].state.isFinal && !gone.contains(job.id) && job.state.isFinal { open -= 1 }
        if jobs[i].state.isFinal && !job.state.isFinal { open += 1 }
        jobs[i] = job
        heard[job.id] = Self.now()
    }

    /// A job an event told of that is not followed: followed from now on if it has not ended and
    /// new jobs are followed.
    private func join(_ job: JobSnapshot) {
        guard followsNewJobs, !job.state.isFinal else { return }
        index[job.id] = jobs.count
        jobs.append(job)
        heard[job.id] = Self.now()
        open += 1
    }

    /// A followed job was removed (told by an event, or found gone by a poll).
    private func removed(_ id: Int64) {
        guard let i = index[id], gone.insert(id).inserted else { return }
        if !jobs[i].state.isFinal { open -= 1 }
    }

    private static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}

extension JobFollower {
    /// Follows the jobs to their ends (``follow(timeout:onUpdate:)``), drawing them on `view`,
    /// and finishes the view; when following fails, the view is abandoned and the error thrown.
    func follow(drawingOn view: JobsView) throws {
        do {
            _ = try follow { view.update($0.jobs, gone: $0.gone, force: false) }
        } catch {
            view.abandon()
            throw error
        }
        view.finish(jobs, gone: gone)
    }
}
