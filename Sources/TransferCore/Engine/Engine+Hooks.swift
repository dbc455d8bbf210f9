import Foundation

/// `--on-end` hooks: exactly once per ending, across crashes. The ending's transaction records
/// `hookPending` (``JobMachine``); ``runHook(_:)`` runs after that commit; the hook's end goes
/// through the machine again (``JobEvent/hookFinished(_:_:)``), which records the result and
/// clears `hookPending` (or moves on to the daemon's hook) in the normal group commit.
///
/// A job that leaves an ending whose hooks have not all finished — `remove` deletes it (a running
/// job is cancelled first: a new ending), or `retry` queues it again — leaves an ``OwedHook`` in
/// that command's transaction; that record takes the place of `hookPending` for that ending until
/// its last hook finished, and a hook already running for it goes on as the record's. Its
/// results are only logged: the job's `hook` field is its current ending's.
extension Engine {
    /// Runs the hooks that a stopped or crashed daemon left pending (at start).
    func runPendingHooks() {
        do {
            for pending in try store.pendingHooks() { runHook(pending.id) }
            // Read by ``recover()``.
            for owedId in owedHooks.keys.sorted() { runOwedHook(owedId) }
        } catch {
            Log.info("cannot read the pending hooks: \(error)")
        }
    }

    /// Runs the hook the job's `hookPending` names; nothing if none is pending (or the daemon
    /// stops: it stays pending for the next start).
    func runHook(_ id: Int64) {
        if shuttingDown { return }
        if hooks.isRunning(.job(id)) {
            hooks.runAgainLater(id)
            return
        }
        guard let r = record(id), let stage = r.hookPending else { return }
        guard let command = stage == .job ? r.request.onEnd : config.onEnd else {
            // The daemon's hook was set when the job ended, but is not any more.
            Log.info("the daemon's --on-end hook owed to this ending is not run: no --on-end now", job: id)
            dispatch(id, .hookFinished(stage, nil), loaded: JobFacts(r))
            return
        }
        let job = JobSnapshot(JobListing(r), live: nil)
        var writer = JobJSONWriter(capacity: 2048)
        writer.write(job)
        writer.key("\n")
        start(
            .job(id), job: id, stage: stage, command: command, input: writer.bytes, state: r.state.rawValue,
            destination: r.destination)
    }

    /// The records of the hooks that transition `t` of job `id` leaves owed (its `keepHook`
    /// actions), each with a new id: the job as its ending left it (`ending` applied: the
    /// cancellation a removal of a running job makes). Made before the transition's patch.
    func owedHooks(for id: Int64, _ t: JobTransition) -> [OwedHook] {
        var out: [OwedHook] = []
        for case .keepHook(let stage, let ending) in t.actions {
            guard var r = record(id) else { continue }
            if let ending { r.apply(ending) }
            var writer = JobJSONWriter(capacity: 2048)
            writer.write(snapshot(of: r))
            out.append(
                OwedHook(
                    id: nextOwedHookId, jobId: id, stage: stage, state: r.state, destination: r.destination,
                    onEnd: r.request.onEnd, job: String(decoding: writer.bytes, as: UTF8.self)))
            nextOwedHookId += 1
        }
        return out
    }

    /// Runs the hook an ``OwedHook`` names next (unless it runs already).
    func runOwedHook(_ owedId: Int64) {
        guard !shuttingDown, let kept = owedHooks[owedId], !hooks.isRunning(.owed(owedId)) else { return }
        guard let command = kept.stage == .job ? kept.onEnd : config.onEnd else {
            Log.info(
                "the daemon's --on-end hook owed to an earlier ending is not run: no --on-end now", job: kept.jobId)
            owedHookFinished(owedId, kept.stage)
            return
        }
        start(
            .owed(owedId), job: kept.jobId, stage: kept.stage, command: command,
            input: Array((kept.job + "\n").utf8), state: kept.state.rawValue, destination: kept.destination)
    }

    private func start(
        _ owner: HookRunner.Owner, job id: Int64, stage: HookStage, command: String, input: [UInt8],
        state: String, destination: String?
    ) {
        let env = [
            "AFTRANSFER_JOB_ID": String(id), "AFTRANSFER_STATE": state, "AFTRANSFER_DESTINATION": destination ?? "",
        ]
        let which = stage == .job ? "job" : "daemon"
        let startedNow = hooks.run(
            owner, job: id, command: command, input: input, environment: env,
            started: { Log.info("running the \(which)'s on-end hook (\(state))", job: id) }
        ) { [weak self] owner, result, timedOut in
            guard let self else { return }
            var why = ""
            if timedOut {
                why = " (killed after \(Int(HookRunner.timeout)) s)"
            } else if self.shuttingDown && result.exitStatus == HookRunner.stoppedStatus {
                why = " (ended by the daemon's stop)"
            }
            // README: the output is in the log too (the `hook` field of a removed or retried
            // ending's job is gone; the log keeps what it said).
            let said = result.output.isEmpty ? "" : "; output: " + result.output
            Log.info("\(which)'s on-end hook exited \(result.exitStatus)\(why)\(said)", job: id)
            switch owner {
            case .owed(let owedId):
                self.owedHookFinished(owedId, stage)
            case .job(let job):
                if self.hooks.takeAgain(job) {
                    // A new ending was recorded while this hook ran: its record replaced this one's.
                    self.runHook(job)
                    return
                }
                guard let now = self.record(job) else { return }
                self.dispatch(job, .hookFinished(stage, result), loaded: JobFacts(now))
            }
            // Written now, not at the end of the pass: a daemon killed in between would run this
            // finished hook again at its next start (SPEC: a finished hook never runs again).
            self.commitOrLog()
        }
        if !startedNow {
            Log.info(
                "the \(which)'s on-end hook (\(state)) waits: \(HookRunner.maxConcurrent) hooks run already", job: id)
        }
    }

    /// An owed hook's `stage` finished: the daemon's runs next, if any, else the record goes.
    private func owedHookFinished(_ owedId: Int64, _ stage: HookStage) {
        guard var kept = owedHooks[owedId] else { return }
        if stage == .job, config.onEnd != nil {
            kept.stage = .daemon
            keepOwedHook(kept)
            afterCommit { [unowned self] in self.runOwedHook(owedId) }
        } else {
            finishOwedHook(owedId)
        }
    }
}
