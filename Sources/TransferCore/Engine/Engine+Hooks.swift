import Foundation

/// `--on-end` hooks: exactly once per ending, across crashes. The ending's transaction records
/// `hookPending` (``JobMachine``); ``runHook(_:)`` runs after that commit; the hook's end goes
/// through the machine again (``JobEvent/hookFinished(_:_:)``), which records the result and
/// clears `hookPending` (or moves on to the daemon's hook) in the normal group commit.
///
/// A job that `remove` deletes while a hook is owed to it (a running job is cancelled first; an
/// ended one may not have run its hook yet) leaves a ``RemovedHook`` in its removal's
/// transaction; that record takes the place of `hookPending` until the ending's last hook
/// finished.
extension Engine {
    /// Runs the hooks that a stopped or crashed daemon left pending (at start).
    func runPendingHooks() {
        do {
            for pending in try store.pendingHooks() { runHook(pending.id) }
            for kept in try store.removedHooks() {
                removedHooks[kept.jobId] = kept
                runHook(kept.jobId)
            }
        } catch {
            Log.info("cannot read the pending hooks: \(error)")
        }
    }

    /// Runs the hook the job's `hookPending` names (or, for a removed job, its ``RemovedHook``);
    /// nothing if none is pending.
    func runHook(_ id: Int64) {
        if hooks.isRunning(id) {
            hooks.runAgainLater(id)
            return
        }
        guard let r = record(id) else {
            if let kept = removedHooks[id] { runRemovedHook(kept) }
            return
        }
        guard let stage = r.hookPending else { return }
        guard let command = stage == .job ? r.request.onEnd : config.onEnd else {
            // The daemon's hook was set when the job ended, but is not any more.
            dispatch(id, .hookFinished(stage, nil), loaded: JobFacts(r))
            return
        }
        let job = JobSnapshot(JobListing(r), live: nil)
        var writer = JobJSONWriter(capacity: 2048)
        writer.write(job)
        writer.key("\n")
        start(
            id, stage: stage, command: command, input: writer.bytes, state: r.state.rawValue,
            destination: r.destination)
    }

    /// The record of the hook owed to job `id`, about to be removed: its state and job object as
    /// its ending left them (`ending` applied: the cancellation a removal makes), or nil if the
    /// job is unknown.
    func removedHook(_ id: Int64, _ stage: HookStage, ending: JobPatch?) -> RemovedHook? {
        guard var r = record(id) else { return nil }
        if let ending { r.apply(ending) }
        var writer = JobJSONWriter(capacity: 2048)
        writer.write(snapshot(of: r))
        return RemovedHook(
            jobId: id, stage: stage, state: r.state, destination: r.destination, onEnd: r.request.onEnd,
            job: String(decoding: writer.bytes, as: UTF8.self))
    }

    private func runRemovedHook(_ kept: RemovedHook) {
        guard let command = kept.stage == .job ? kept.onEnd : config.onEnd else {
            removedHookFinished(kept.jobId, kept.stage)
            return
        }
        start(
            kept.jobId, stage: kept.stage, command: command, input: Array((kept.job + "\n").utf8),
            state: kept.state.rawValue, destination: kept.destination)
    }

    private func start(
        _ id: Int64, stage: HookStage, command: String, input: [UInt8], state: String, destination: String?
    ) {
        let env = [
            "AFTRANSFER_JOB_ID": String(id), "AFTRANSFER_STATE": state, "AFTRANSFER_DESTINATION": destination ?? "",
        ]
        let which = stage == .job ? "job" : "daemon"
        Log.info("running the \(which)'s on-end hook (\(state))", job: id)
        hooks.run(id, command: command, input: input, environment: env) { [weak self] result, timedOut in
            guard let self else { return }
            let why = timedOut ? " (killed after \(Int(HookRunner.timeout)) s)" : ""
            Log.info("\(which)'s on-end hook exited \(result.exitStatus)\(why)", job: id)
            if self.hooks.takeAgain(id) {
                // A new ending was recorded while this hook ran: its record replaced this one's.
                self.runHook(id)
                return
            }
            guard let now = self.record(id) else {
                self.removedHookFinished(id, stage)
                return
            }
            self.dispatch(id, .hookFinished(stage, result), loaded: JobFacts(now))
        }
    }

    /// A removed job's hook `stage` finished: the daemon's runs next, if any, else the record goes.
    private func removedHookFinished(_ id: Int64, _ stage: HookStage) {
        guard var kept = removedHooks[id] else { return }
        if stage == .job, config.onEnd != nil {
            kept.stage = .daemon
            keepRemovedHook(kept)
            afterCommit { [unowned self] in self.runHook(id) }
        } else {
            finishRemovedHook(id)
        }
    }
}
