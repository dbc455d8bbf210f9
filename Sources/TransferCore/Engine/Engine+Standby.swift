/// Standing by: the next download's request goes out while a finished one is put in place.
///
/// A job holds its slot until its file is in place (SPEC: `running` until `completed`, at most
/// `--max-active` of them), and for a small file most of that time is the finishing: the data
/// synced, the rename, the directory synced, the row committed — with no byte on the network. While
/// a slot's job finishes, the next queued download may *stand by*: its request is sent and its
/// response held — read and kept by the curl layer, not handed over (``CurlMulti/addHolding(_:)``,
/// ``HeldResponse``). The job stays `queued` (its row, its events, `status`, `list`, `daemon
/// status`), no byte of its response reaches its part, and nothing of it is written; when the slot
/// is given back it starts as any job does (`running`, its attempt counted) and takes the response
/// that is already there.
///
/// So the requests in flight never outnumber `--max-active` (the running jobs that still
/// transfer, and at most one standing by for each one finishing), nor the `running` jobs.
/// Only a download's first attempt, on one connection, stands by: its request depends on nothing
/// that starting it would change (no part to resume, no ranges, no validator). And only an
/// unpaced one (no `--limit-rate`, no daemon-wide download limit in force): the response of a
/// paced one would be read ahead of its pace, at the speed of the network the limit spares. Any
/// change to a job standing by (a command, a new URL) stops its request first, and it waits in the
/// queue as before; so does a job outranked by one queued after it, when the slot is given back,
/// and every job standing by when a download limit comes into force.
extension Engine {
    /// Starts standby attempts for the slots whose jobs are finishing (see above).
    func standBy() {
        guard !shuttingDown, !holdScheduling, !downloadLimitInForce else { return }
        let finishing = tasks.values.reduce(0) { $0 + ($1.phase == .finishing ? 1 : 0) }
        while tasks.count - finishing + standby.count < config.maxActive, standby.count < finishing,
            let id = scheduler.peekNext(), standby[id] == nil, let f = scheduler.facts[id], Self.mayStandBy(f),
            let r = record(id), (r.request.connections ?? config.connections) <= 1, r.request.limitRate == nil
        {
            _ = scheduler.popNext()
            let task = DownloadTask(engine: self, record: r)
            standby[id] = task
            do {
                try task.startStandingBy()
            } catch {
                // It starts with its slot and meets the same error then, as its attempt's.
                dropStandby(id)
                return
            }
        }
    }

    /// Whether a daemon-wide download limit is in force (a fixed one or a schedule entry): it
    /// paces every download, so none stands by, and those standing by when it comes are dropped
    /// (``limitsChanged()``).
    var downloadLimitInForce: Bool { bandwidth.download.rate != nil }

    /// Whether a queued job's attempt may stand by, as far as its facts tell (its row is read only
    /// then, for its connections): a download's first attempt, with nothing to resume.
    private static func mayStandBy(_ f: JobFacts) -> Bool {
        f.kind == .download && f.attempts == 0 && f.durableBytes == 0 && !f.segmented
    }

    /// The next job to start in a free slot: the standing-by one that starts first, unless a
    /// queued job outranks it (queued since, at a higher priority): that one starts, and the
    /// standby is dropped, so that the requests in flight stay within `--max-active`.
    func takeNext() -> Int64? {
        guard let next = scheduler.next(standing: standby.keys) else { return nil }
        if let dropped = next.dropped { dropStandby(dropped) }
        return next.id
    }

    /// Stops a job's standby attempt, if it has one: the request is abandoned (nothing of it was
    /// written) and the job is queued as before. Called before any change to the job.
    func dropStandby(_ id: Int64) {
        guard let task = standby.removeValue(forKey: id) else { return }
        task.halt()
        scheduler.putBack(id)
    }

    /// Stops every standby attempt (the daemon stops).
    func dropAllStandby() {
        for id in standby.keys.sorted() { dropStandby(id) }
    }
}

extension Engine {
    /// An attempt's response is complete (``AttemptHost``): its slot's next job may stand by.
    func attemptFinishing() { standBy() }
}
