import Foundation

/// The control commands (`pause`, `resume`, `cancel`, `retry`, `remove`) through ``JobMachine``:
/// decided and written first, acted on after.
extension Engine {
    /// A control command waiting for a job whose file is being put in place.
    struct ParkedControl {
        var action: ControlAction
        var ids: [Int64]
        var deleteFiles: Bool
        var answer: (Result<ControlResult, Error>) -> Void
    }

    /// Applies a control command to each id, now or — when one of them is a job whose file is
    /// being put in place (its body complete and verified: milliseconds for a small file, an
    /// fsync and a rename for a large one) — once that has ended, so that the command applies to
    /// the job as it ends up: `cancel` of a download that completes meanwhile is refused as for a
    /// completed job, `remove` removes the completed job (and its file with `deleteFiles`). A
    /// command naming a job an earlier waiting command names waits behind it, so that one
    /// job's commands keep their order.
    /// - Parameter answer: the result (on the loop thread); `disk_full` when the job database
    ///   cannot be written (nothing changed then), ``EngineStopping`` when the daemon stops first.
    public func control(
        _ action: ControlAction, ids: [Int64], deleteFiles: Bool,
        answer: @escaping (Result<ControlResult, Error>) -> Void
    ) {
        if mustWait(ids) {
            parkedControls.append(ParkedControl(action: action, ids: ids, deleteFiles: deleteFiles, answer: answer))
            return
        }
        answer(Result { try control(action, ids: ids, deleteFiles: deleteFiles) })
    }

    /// Whether a command on `ids` waits: one of them is finishing (``TransferTask/holdsCommands``),
    /// or named by a waiting command.
    private func mustWait(_ ids: [Int64], before end: Int? = nil) -> Bool {
        let earlier = parkedControls.prefix(end ?? parkedControls.count)
        return ids.contains { id in tasks[id]?.holdsCommands == true || earlier.contains { $0.ids.contains(id) } }
    }

    /// Runs the waiting control commands that need wait no more, in the order they came (at the
    /// end of a loop pass). Their changes are committed and their events sent before they are
    /// answered, as for a command answered at once.
    func runParkedControls() {
        var answers: [() -> Void] = []
        var i = 0
        while i < parkedControls.count {
            let parked = parkedControls[i]
            if mustWait(parked.ids, before: i) {
                i += 1
                continue
            }
            parkedControls.remove(at: i)
            let result = Result { try control(parked.action, ids: parked.ids, deleteFiles: parked.deleteFiles) }
            answers.append { parked.answer(result) }
        }
        guard !answers.isEmpty else { return }
        commitOrLog()
        for answer in answers { answer() }
    }

    /// Applies a control command to each id; returns the jobs acted on and the refusals.
    ///
    /// Every transition is decided first and its row changes are written in one transaction;
    /// only then does anything change in memory or on disk (attempts stopped, parts deleted). So
    /// a store that cannot write (the home's disk full) refuses the whole command and leaves
    /// the jobs as they were, in memory as in the database.
    /// - Throws: `disk_full` when the job database cannot be written; nothing changed then.
    public func control(_ action: ControlAction, ids: [Int64], deleteFiles: Bool) throws -> ControlResult {
        try ensureStoreWritable()
        let event: JobEvent
        switch action {
        case .pause: event = .pause
        case .resume: event = .resume
        case .cancel: event = .cancel
        case .retry: event = .retry
        case .remove: event = .remove(deleteFiles: deleteFiles)
        }
        enum Decision {
            case act(JobTransition, JobFacts, [OwedHook])
            case refuse(ControlRefusal)
        }
        var decisions: [(Int64, Decision)] = []
        decisions.reserveCapacity(ids.count)
        // Sized once: a command on 30,000 jobs held two tables of their patches while one grew.
        var probe = WriteBatch(capacity: ids.count)
        // An id given twice is one request: acted on once, never refused for the repeat
        // (`resume 5 5` resumes job 5 and exits 0, as `kill 5 5` signals it once).
        var given = Set<Int64>()
        // The paths jobs retried by this command take: a second job of the command retried to one
        // of them is refused, as it is by a later command (``decide(_:_:_:claimed:)``).
        var claimed: [String: Int64] = [:]
        if action == .remove { vanishing.reserveCapacity(ids.count) }
        for id in ids where given.insert(id).inserted {
            guard let facts = scheduler.facts[id] ?? record(id).map(JobFacts.init) else {
                decisions.append((id, .refuse(ControlRefusal(id: id, state: nil, message: "job \(id) does not exist"))))
                continue
            }
            switch decide(id, event, facts, claimed: claimed) {
            case .success(let t):
                if event == .retry, let path = facts.heldPath { claimed[path] = id }
                let owed = owedHooks(for: id, t)
                decisions.append((id, .act(t, facts, owed)))
                probe.patch(id, t.patch)
                for kept in owed { probe.putOwedHook(kept) }
                // The part is deleted after these rows are written: recorded with them, so that
                // a crash in between leaves it to the next start, not on the disk for good.
                if t.actions.contains(.deletePart) || t.actions.contains(.stopAttempt(.cancel)),
                    let part = record(id).flatMap(part(of:))
                {
                    probe.doom(part)
                }
                if t.actions.contains(.deleteRow) {
                    probe.delete(id)
                    vanishing[id] = record(id)
                }
            case .failure(let refusal):
                decisions.append(
                    (id, .refuse(ControlRefusal(id: id, state: refusal.state, message: refusal.message))))
            }
        }
        defer { vanishing = [:] }
        let committedAt = clock.wall()
        if !probe.isEmpty {
            do { try store.commit(probe, now: committedAt) } catch { throw storeFailure(error) }
        }
        probe = WriteBatch()
        var done: [JobSnapshot] = []
        done.reserveCapacity(decisions.count)
        var refused: [ControlRefusal] = []
        holdScheduling = true
        for (id, decision) in decisions {
            switch decision {
            case .refuse(let r):
                refused.append(r)
            case .act(let t, let facts, let owed):
                // Its patch is written (above): only the copies in memory change.
                perform(id, t, facts: facts, owed: owed, committedAt: committedAt)
                // For `remove`, its last object, from the record kept of the row going away: as
                // it ended, for a running job (cancelled first, its attempt closed).
                if let job = snapshot(id) { done.append(job) }
            }
        }
        holdScheduling = false
        schedule()
        return ControlResult(jobs: done, refused: refused)
    }
}
