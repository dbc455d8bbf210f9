import Foundation

/// `--on-end` hooks: exactly once per ending, across crashes. The ending's transaction records
/// `hookPending` (``JobMachine``); ``runHook(_:)`` runs after that commit; the hook's end goes
/// through the machine again (``JobEvent/hookFinished(_:_:)``), which records the result and
/// clears `hookPending` (or moves on to the daemon's hook) in the normal group commit.
extension Engine {
    /// Runs the hooks that a stopped or crashed daemon left pending (at start).
    func runPendingHooks() {
        do {
            for pending in try store.pendingHooks() { runHook(pending.id) }
        } catch {
            Log.info("cannot read the pending hooks: \(error)")
        }
    }

    /// Runs the hook the job's `hookPending` names; nothing if none is pending.
    func runHook(_ id: Int64) {
        if hooks.isRunning(id) {
            hooks.runAgainLater(id)
            return
        }
        guard let r = record(id), let stage = r.hookPending else { return }
        guard let command = stage == .job ? r.request.onEnd : config.onEnd else {
            // The daemon's hook was set when the job ended, but is not any more.
            dispatch(id, .hookFinished(stage, nil), loaded: JobFacts(r))
            return
        }
        let job = JobSnapshot(JobListing(r), live: nil)
        var writer = JobJSONWriter(capacity: 2048)
        writer.write(job)
        writer.key("\n")
        let env = [
            "AFTRANSFER_JOB_ID": String(id), "AFTRANSFER_STATE": r.state.rawValue,
            "AFTRANSFER_DESTINATION": r.destination ?? "",
        ]
        let which = stage == .job ? "job" : "daemon"
        Log.info("running the \(which)'s on-end hook (\(r.state.rawValue))", job: id)
        hooks.run(id, command: command, input: writer.bytes, environment: env) { [weak self] result, timedOut in
            guard let self else { return }
            let why = timedOut ? " (killed after \(Int(HookRunner.timeout)) s)" : ""
            Log.info("\(which)'s on-end hook exited \(result.exitStatus)\(why)", job: id)
            if self.hooks.takeAgain(id) {
                // A new ending was recorded while this hook ran: its record replaced this one's.
                self.runHook(id)
                return
            }
            guard let now = self.record(id) else { return }  // removed meanwhile
            self.dispatch(id, .hookFinished(stage, result), loaded: JobFacts(now))
        }
    }
}
