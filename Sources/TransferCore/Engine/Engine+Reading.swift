import Foundation

/// Reading jobs: the job object of one job or a page of them, the running attempt's progress
/// taken from memory, the rest from the store.
extension Engine {
    /// A job's full row as it is now: the running attempt's copy, or the store's with this
    /// pass's uncommitted changes on top.
    func record(_ id: Int64) -> JobRecord? {
        if let t = tasks[id] { return t.record }
        if let r = ending[id] { return r }
        if let r = vanishing[id] { return r }
        if let r = queuedRecords[id] { return r }
        guard var r = (try? store.job(id)).flatMap({ $0 }) else { return nil }
        if let p = batch.patches[id] {
            // As the row will be once committed: `updatedAt` is the pending change's instant.
            if let at = batch.changedAt[id] { r.apply(p, at: at) } else { r.apply(p) }
        }
        let pending =
            batch.attempts.isEmpty
            ? [] : batch.attempts.filter { $0.key.jobId == id }.sorted { $0.key.seq < $1.key.seq }
        for (key, a) in pending {
            if key.seq < r.history.count { r.history[key.seq] = a } else { r.history.append(a) }
        }
        return r
    }

    func live(_ t: TransferTask) -> LiveProgress {
        LiveProgress(
            bytes: t.bytes, total: t.total ?? t.record.total, rate: shownRate(t), connections: t.openConnections,
            httpStatus: t.attemptStatus)
    }

    /// A transfer's `rate`: the smoothed rate, never above the limits it runs under (its own
    /// `--limit-rate`, the daemon-wide limit of its direction); while a limit holds it back, the
    /// rate that limit gives it (its own, or its share of the daemon-wide one). Under a limit of a
    /// few hundred bytes a second the budget lets 16 KiB through at once and then nothing for
    /// many samples: the quarter-second samples showed 64 KiB/s, then 0, for a job moving 300 B/s.
    func shownRate(_ t: TransferTask) -> Double {
        let own = t.limiter?.rate
        let all = (t.isUpload ? bandwidth.upload : bandwidth.download).rate.map(Double.init)
        if t.isHeldByLimit {
            // Its share of the daemon-wide limit, as the budget's turns split it among the
            // transfers of its direction (one with a lower limit of its own leaves the rest).
            let share = all.map { limit in
                // Only transfers that draw on the budget: one waiting for a connection to its
                // host (`--max-per-host`) takes no turn, and counted it halved the share shown.
                let caps = tasks.values.filter { $0.isUpload == t.isUpload && ($0 === t || $0.openConnections > 0) }
                    .map { $0.limiter?.rate }
                return BandwidthGovernor.fairLevel(of: limit, caps: caps)
            }
            if let limit = [own, share].compactMap({ $0 }).min() { return limit }
        }
        return [t.rate.value, own, all].compactMap { $0 }.min() ?? t.rate.value
    }

    /// `history` with its running attempt's entry (at `seq`, still open) showing its request's
    /// `status` and the bytes so far, as the job object's own `bytes` does: the stored entry has
    /// them only from its last checkpoint.
    static func withOpenEntry(
        _ history: [AttemptRecord], at seq: Int, _ progress: LiveProgress, status: Int?
    ) -> [AttemptRecord] {
        guard seq < history.count, history[seq].endedAt == nil else { return history }
        var history = history
        history[seq].bytes = progress.bytes
        if let status { history[seq].httpStatus = status }
        return history
    }

    /// A job's object now (a job being removed: as its ending left it, ``perform``).
    func snapshot(_ id: Int64) -> JobSnapshot? {
        record(id).map(snapshot(of:))
    }

    /// The object of a job whose row is `r`: with the running attempt's progress and open history
    /// entry, if it runs.
    func snapshot(of r: JobRecord) -> JobSnapshot {
        let id = r.id ?? 0
        var listing = JobListing(r)
        listing.nextRetryAt = nextRetryAt(id, stored: listing.nextRetryAt)
        if let t = tasks[id] {
            listing.history = r.history.count > t.historySeq ? r.history : r.history + [t.historyEntry]
            guard r.state == .running else { return JobSnapshot(listing, live: nil, lastBytes: lastBytes[id]) }
            let progress = live(t)
            listing.history = Self.withOpenEntry(listing.history, at: t.historySeq, progress, status: t.responseStatus)
            return JobSnapshot(listing, live: progress, lastBytes: lastBytes[id])
        }
        return JobSnapshot(listing, live: nil, lastBytes: lastBytes[id])
    }

    /// The ranges of a running segmented download (`transfer.segments`): empty when the job runs
    /// over one connection or does not run; nil for an unknown id.
    public func segments(of id: Int64) -> [SegmentProgress]? {
        if let t = tasks[id] { return t.segmentProgress ?? [] }
        return record(id) == nil ? nil : []
    }

    /// The job object of one job, or nil.
    public func job(_ id: Int64) -> JobSnapshot? { snapshot(id) }

    /// Up to `limit` job objects with an id above `after`, in id order, optionally in one state.
    public func jobs(state: TransferState?, after: Int64?, limit: Int) -> [JobSnapshot] {
        commitOrLog()
        let page = (try? store.listings(state: state, after: after, limit: limit)) ?? []
        return page.map { l in
            if let t = tasks[l.id] {
                var listing = JobListing(t.record)
                listing.history = l.history
                guard t.record.state == .running else { return JobSnapshot(listing, live: nil) }
                let progress = live(t)
                listing.history = Self.withOpenEntry(
                    listing.history, at: t.historySeq, progress, status: t.responseStatus)
                return JobSnapshot(listing, live: progress)
            }
            var l = l
            l.nextRetryAt = nextRetryAt(l.id, stored: l.nextRetryAt)
            return JobSnapshot(l, live: nil, lastBytes: lastBytes[l.id])
        }
    }

    /// A waiting job's `nextRetryAt`: wall now plus what its monotonic deadline has left (the
    /// stored time would be off by any jump of the wall clock since it was armed).
    private func nextRetryAt(_ id: Int64, stored: Double?) -> Double? {
        guard stored != nil, let deadline = scheduler.deadline(of: id) else { return stored }
        return clock.wallTime(ofMonotonic: deadline)
    }

    /// The equivalent curl command of a job, secrets redacted; nil for an unknown id.
    public func curlCommand(_ id: Int64) -> String? { record(id).map(CurlCommandRenderer.render) }
}
