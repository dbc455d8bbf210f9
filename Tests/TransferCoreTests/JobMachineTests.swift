import XCTest

@testable import TransferBase
@testable import TransferCore

/// Every legal transition of ``JobMachine`` and the refusals around it.
final class JobMachineTests: XCTestCase {
    private let now = 1_000.0

    private func job(_ state: TransferState, waitReason: WaitReason? = nil, retriesUsed: Int = 0, retryLimit: Int = 8)
        -> JobFacts
    {
        JobFacts(
            id: 7, kind: .download, state: state, priority: 0, destination: "/d/f", waitReason: waitReason,
            attempts: 2, retriesUsed: retriesUsed, retryLimit: retryLimit)
    }

    private func apply(
        _ event: JobEvent, _ f: JobFacts, reachable: Bool = true, finishing: Bool = false
    ) -> Result<JobTransition, JobRefusal> {
        JobMachine.transition(
            event, f, MachineContext(now: now, isReachable: reachable, jitter: 0, attemptFinishing: finishing))
    }

    private func success(_ r: Result<JobTransition, JobRefusal>, file: StaticString = #filePath, line: UInt = #line)
        -> JobTransition?
    {
        switch r {
        case .success(let t): return t
        case .failure(let e):
            XCTFail("refused: \(e.message)", file: file, line: line)
            return nil
        }
    }

    func testThatEveryNewStateIsOneTheStateTableAllows() {
        let events: [JobEvent] = [
            .start, .attemptEnded(.completed(sha256: "x", bytes: 1)),
            .attemptEnded(.failed(TransferError(.network, "x"), retryAfter: nil)), .pause, .resume, .cancel, .retry,
            .retryDue, .networkReturned, .requeue(.restart), .recovered(fileInPlace: false),
            .recovered(fileInPlace: true), .diskSpaceChanged, .rangeFailed(TransferError(.network, "x")),
            .attemptEnded(.failed(TransferError(.diskFull, "x"), retryAfter: nil)),
        ]
        for state in TransferState.allCases {
            for reason in [nil, WaitReason.backoff, .offline, .disk] {
                for e in events {
                    if case .success(let t) = apply(e, job(state, waitReason: reason)), let next = t.patch.state {
                        XCTAssertTrue(state.canTransition(to: next), "\(state) -> \(next) on \(e)")
                    }
                }
            }
        }
    }

    func testThatStartingAQueuedJobCountsAnAttemptAndClearsTheWait() throws {
        let t = try XCTUnwrap(success(apply(.start, job(.queued))))
        XCTAssertEqual(t.patch.state, .running)
        XCTAssertEqual(t.patch.attempts, 3)
        XCTAssertEqual(t.patch.error, .some(nil))
        XCTAssertEqual(t.patch.waitReason, .some(nil))
        XCTAssertEqual(t.actions, [.startAttempt, .notify])
    }

    func testThatACompletedAttemptRecordsTheDigestAndFreesTheSlot() throws {
        let t = try XCTUnwrap(success(apply(.attemptEnded(.completed(sha256: "abc", bytes: 42)), job(.running))))
        XCTAssertEqual(t.patch.state, .completed)
        XCTAssertEqual(t.patch.sha256, .some("abc"))
        XCTAssertEqual(t.patch.total, .some(42))
        XCTAssertEqual(t.patch.completedAt, .some(now))
        XCTAssertEqual(t.actions, [.notify, .schedule])
    }

    func testThatARetryableFailureWaitsOnABackoffTimerAndSpendsARetry() throws {
        let err = TransferError(.network, "reset")
        let t = try XCTUnwrap(
            success(apply(.attemptEnded(.failed(err, retryAfter: nil)), job(.running, retriesUsed: 2))))
        XCTAssertEqual(t.patch.state, .waiting)
        XCTAssertEqual(t.patch.retriesUsed, 3)
        XCTAssertEqual(t.patch.waitReason, .some(.backoff))
        // The third retry waits 0.5 × 2² = 2 s (no jitter).
        XCTAssertEqual(t.patch.nextRetryAt, .some(now + 2))
        XCTAssertEqual(t.actions, [.armRetryTimer(at: now + 2), .notify, .schedule])
    }

    /// Found by an outside audit: a cancelled job's path was taken by a new job, and `retry` of
    /// the old one set both writing one part (one completed with bytes of the two files).
    func testThatRetryIsRefusedWhileAnotherJobHoldsTheJobsFile() throws {
        for state in [TransferState.cancelled, .failed] {
            let held = JobMachine.transition(.retry, job(state), MachineContext(now: now, pathHolder: 9))
            guard case .failure(let refusal) = held else { return XCTFail("retry went ahead from \(state)") }
            XCTAssertEqual(refusal.message, "cannot retry job 7: job 9 now writes to /d/f")
            XCTAssertEqual(refusal.state, state)
            XCTAssertEqual(success(apply(.retry, job(state)))?.patch.state, .queued)
        }
    }

    func testThatRetryAfterIsHonouredAsAMinimum() throws {
        let err = TransferError(.httpStatus, "503", retryable: true)
        let t = try XCTUnwrap(success(apply(.attemptEnded(.failed(err, retryAfter: 30)), job(.running))))
        XCTAssertEqual(t.patch.nextRetryAt, .some(now + 30))
    }

    func testThatANetworkFailureWhileOfflineWaitsForTheNetworkWithoutSpendingARetry() throws {
        let err = TransferError(.network, "unreachable")
        let t = try XCTUnwrap(
            success(apply(.attemptEnded(.failed(err, retryAfter: nil)), job(.running), reachable: false)))
        XCTAssertEqual(t.patch.state, .waiting)
        XCTAssertEqual(t.patch.waitReason, .some(.offline))
        XCTAssertNil(t.patch.retriesUsed)
        XCTAssertEqual(t.patch.nextRetryAt, .some(nil))
    }

    func testThatRetriesUsedUpFailTheJobAsNotRetryable() throws {
        let err = TransferError(.timeout, "stalled")
        let t = try XCTUnwrap(
            success(apply(.attemptEnded(.failed(err, retryAfter: nil)), job(.running, retriesUsed: 8))))
        XCTAssertEqual(t.patch.state, .failed)
        XCTAssertEqual(t.patch.error??.retryable, false)
    }

    func testThatANonRetryableErrorFailsAtOnce() throws {
        let err = TransferError(.httpStatus, "404", retryable: false)
        let t = try XCTUnwrap(success(apply(.attemptEnded(.failed(err, retryAfter: nil)), job(.running))))
        XCTAssertEqual(t.patch.state, .failed)
    }

    func testThatPausingARunningJobStopsItsAttempt() throws {
        let t = try XCTUnwrap(success(apply(.pause, job(.running))))
        XCTAssertEqual(t.patch.state, .paused)
        XCTAssertEqual(t.actions, [.stopAttempt(.pause), .notify, .schedule])
    }

    func testThatPausingAWaitingJobForgetsItsTimer() throws {
        let t = try XCTUnwrap(success(apply(.pause, job(.waiting, waitReason: .backoff))))
        XCTAssertEqual(t.patch.state, .paused)
        XCTAssertEqual(t.patch.nextRetryAt, .some(nil))
        XCTAssertEqual(t.actions, [.cancelRetryTimer, .notify])
    }

    func testThatResumeAndRetryQueueTheJobAgain() throws {
        XCTAssertEqual(success(apply(.resume, job(.paused)))?.patch.state, .queued)
        let retry = try XCTUnwrap(success(apply(.retry, job(.failed, retriesUsed: 8))))
        XCTAssertEqual(retry.patch.state, .queued)
        XCTAssertEqual(retry.patch.retriesUsed, 0)
        XCTAssertEqual(success(apply(.retry, job(.cancelled)))?.patch.state, .queued)
    }

    func testThatCancellingDiscardsThePartWhateverTheUnfinishedState() throws {
        let running = try XCTUnwrap(success(apply(.cancel, job(.running))))
        XCTAssertEqual(running.actions, [.stopAttempt(.cancel), .notify, .schedule])
        XCTAssertEqual(running.patch.durableBytes, 0)
        for state in [TransferState.queued, .waiting, .paused] {
            let t = try XCTUnwrap(success(apply(.cancel, job(state))))
            XCTAssertEqual(t.patch.state, .cancelled)
            XCTAssertEqual(t.patch.error??.code, .cancelled)
            XCTAssertEqual(t.actions, [.cancelRetryTimer, .deletePart, .notify])
        }
    }

    func testThatRemovingKeepsACompletedFileUnlessAsked() throws {
        let kept = try XCTUnwrap(success(apply(.remove(deleteFiles: false), job(.completed))))
        XCTAssertEqual(kept.actions, [.cancelRetryTimer, .deleteRow, .schedule])
        let deleted = try XCTUnwrap(success(apply(.remove(deleteFiles: true), job(.completed))))
        XCTAssertEqual(deleted.actions, [.cancelRetryTimer, .deleteFile, .deleteRow, .schedule])
        let running = try XCTUnwrap(success(apply(.remove(deleteFiles: false), job(.running))))
        var cancelled = JobPatch()
        cancelled.state = .cancelled
        cancelled.error = .some(JobMachine.cancelledError)
        XCTAssertEqual(
            running.actions,
            [
                .stopAttempt(.cancel), .cancelRetryTimer, .deletePart, .notifyRemoved(ending: cancelled), .deleteRow,
                .schedule,
            ])
    }

    func testThatRemovingKeepsTheHookOwedToTheJob() throws {
        var hooked = job(.running)
        hooked.hasOnEnd = true
        // A running job is cancelled first: an ending, whose hook outlives the row.
        let running = try XCTUnwrap(success(apply(.remove(deleteFiles: false), hooked)))
        var end = JobPatch()
        end.state = .cancelled
        end.error = .some(JobMachine.cancelledError)
        end.hook = .some(nil)
        end.hookPending = .some(.job)
        XCTAssertEqual(
            running.actions,
            [
                .stopAttempt(.cancel), .cancelRetryTimer, .deletePart, .keepHook(.job, ending: end),
                .notifyRemoved(ending: end), .deleteRow, .schedule,
            ])
        XCTAssertTrue(running.patch.isEmpty)
        // Only the daemon's hook: that stage.
        let daemonOnly = try XCTUnwrap(
            success(
                JobMachine.transition(
                    .remove(deleteFiles: false), job(.running),
                    MachineContext(now: now, isReachable: true, jitter: 0, daemonHook: true))))
        XCTAssertTrue(daemonOnly.actions.contains { if case .keepHook(.daemon, .some) = $0 { true } else { false } })
        // No hook at all: nothing kept.
        let plain = try XCTUnwrap(success(apply(.remove(deleteFiles: false), job(.running))))
        XCTAssertFalse(plain.actions.contains { if case .keepHook = $0 { true } else { false } })
        // An ended job whose hook has not run yet: that hook, with no new ending.
        var pending = job(.completed)
        pending.hookPending = .daemon
        let ended = try XCTUnwrap(success(apply(.remove(deleteFiles: false), pending)))
        XCTAssertEqual(ended.actions, [.cancelRetryTimer, .keepHook(.daemon, ending: nil), .deleteRow, .schedule])
        // A queued job removed has not ended: no hook.
        hooked.state = .queued
        let queued = try XCTUnwrap(success(apply(.remove(deleteFiles: false), hooked)))
        XCTAssertFalse(queued.actions.contains { if case .keepHook = $0 { true } else { false } })
    }

    func testThatTimersAndTheNetworkQueueOnlyJobsWaitingForThem() {
        XCTAssertEqual(success(apply(.retryDue, job(.waiting, waitReason: .backoff)))?.patch.state, .queued)
        XCTAssertEqual(success(apply(.networkReturned, job(.waiting, waitReason: .offline)))?.patch.state, .queued)
        if case .success = apply(.retryDue, job(.waiting, waitReason: .offline)) {
            XCTFail("a timer woke an offline job")
        }
        if case .success = apply(.networkReturned, job(.waiting, waitReason: .backoff)) {
            XCTFail("the network woke a backoff job")
        }
    }

    func testThatAShutdownRequeuesTellingSubscribersAndStartingNothing() throws {
        let stop = try XCTUnwrap(success(apply(.requeue(.shutdown), job(.running))))
        XCTAssertEqual(stop.patch.state, .queued)
        XCTAssertEqual(stop.actions, [.stopAttempt(.shutdown), .notify])
        let restart = try XCTUnwrap(success(apply(.requeue(.restart), job(.running))))
        XCTAssertEqual(restart.actions, [.stopAttempt(.restart), .notify, .schedule])
        XCTAssertEqual(success(apply(.recovered(fileInPlace: false), job(.running)))?.patch.state, .queued)
        // A crash between the rename and the row: the file is in place, the job is complete.
        let done = try XCTUnwrap(success(apply(.recovered(fileInPlace: true), job(.running))))
        XCTAssertEqual(done.patch.state, .completed)
        XCTAssertEqual(done.patch.finalizing, false)
        XCTAssertEqual(done.patch.completedAt, .some(now))
    }

    func testThatCommandsThatDoNotApplyAreRefusedNamingTheJobAndItsState() {
        let cases: [(JobEvent, TransferState)] = [
            (.pause, .completed), (.resume, .running), (.retry, .running), (.cancel, .completed), (.start, .paused),
        ]
        for (event, state) in cases {
            guard case .failure(let refusal) = apply(event, job(state)) else {
                XCTFail("\(event) on \(state) was accepted")
                continue
            }
            XCTAssertEqual(refusal.state, state)
            XCTAssertTrue(refusal.message.contains("job 7"), refusal.message)
            XCTAssertTrue(refusal.message.contains(state.rawValue), refusal.message)
        }
    }

    func testThatSetURLOfAnUploadIsRefusedNamingTheJobAndItsState() {
        var upload = job(.paused)
        upload.kind = .upload
        guard case .failure(let r) = apply(.setURL("http://h/x", keepPart: false), upload) else {
            return XCTFail("set-url of an upload accepted")
        }
        XCTAssertEqual(r.message, "cannot set the URL of job 7: it is a paused upload; set-url is for downloads")
    }

    func testThatAFailedRangeIsAskedForAgainOnlyWhileARetryIsLeftAndSpendsIt() throws {
        let network = TransferError(.network, "reset", retryable: true)
        let t = try XCTUnwrap(success(apply(.rangeFailed(network), job(.running, retriesUsed: 2))))
        XCTAssertEqual(t.patch.retriesUsed, 3)
        XCTAssertNil(t.patch.state, "the attempt goes on")
        XCTAssertEqual(t.actions, [])
        guard case .failure = apply(.rangeFailed(network), job(.running, retriesUsed: 8)) else {
            return XCTFail("a range asked for again with no retry left")
        }
        guard case .failure = apply(.rangeFailed(TransferError(.httpStatus, "404", retryable: false)), job(.running))
        else { return XCTFail("a range asked for again after an error that is not retryable") }
    }

    /// Ranges that failed spent their retries; an attempt that ended before asking for them again
    /// waits for the retry they paid for, without spending one more (it failed with one left).
    func testThatAnAttemptEndedByRangesThatSpentTheirRetriesWaitsWithoutSpendingAnother() throws {
        let network = TransferError(.network, "reset", retryable: true)
        let spent = AttemptResult.failed(network, retryAfter: nil, retrySpent: true)
        let t = try XCTUnwrap(success(apply(.attemptEnded(spent), job(.running, retriesUsed: 8))))
        XCTAssertEqual(t.patch.state, .waiting)
        XCTAssertNil(t.patch.retriesUsed, "no retry spent twice")
        let second = try XCTUnwrap(success(apply(.attemptEnded(spent), job(.running, retriesUsed: 2))))
        guard case .armRetryTimer(let at)? = second.actions.first else { return XCTFail("\(second.actions)") }
        XCTAssertEqual(at, now + 1, "the second retry's backoff, not the third's")
        let notRetryable = AttemptResult.failed(TransferError(.httpStatus, "404"), retryAfter: nil, retrySpent: true)
        XCTAssertEqual(try XCTUnwrap(success(apply(.attemptEnded(notRetryable), job(.running)))).patch.state, .failed)
    }

    func testThatAFinishingJobRefusesEveryCommand() {
        // The engine holds a command on a finishing job until its file is in place or the
        // attempt failed (``Engine/control(_:ids:deleteFiles:answer:)``); the machine refuses
        // one given meanwhile all the same, `remove` included: its file may still appear.
        for event in [JobEvent.pause, .cancel, .remove(deleteFiles: false), .remove(deleteFiles: true)] {
            guard case .failure(let r) = apply(event, job(.running), finishing: true) else {
                XCTFail("\(event) accepted while finishing")
                continue
            }
            XCTAssertTrue(r.message.hasPrefix("cannot "), r.message)
            XCTAssertTrue(r.message.contains("job 7: it is running and being moved into place"), r.message)
        }
    }

    // MARK: - Disk full

    func testThatRunningOutOfSpaceWaitsForDiskWithoutSpendingARetryOrArmingATimer() throws {
        let full = TransferError(.diskFull, "cannot write /d/f.aftpart: No space left on device", retryable: false)
        let t = try XCTUnwrap(
            success(apply(.attemptEnded(.failed(full, retryAfter: nil)), job(.running, retriesUsed: 3))))
        XCTAssertEqual(t.patch.state, .waiting)
        XCTAssertEqual(t.patch.waitReason, .some(.disk))
        XCTAssertEqual(t.patch.nextRetryAt, .some(nil))
        XCTAssertNil(t.patch.retriesUsed, "no retry is spent waiting for space")
        XCTAssertEqual(t.patch.error??.code, .diskFull)
        XCTAssertEqual(t.patch.error??.retryable, true)
        XCTAssertEqual(t.actions, [.watchDiskSpace, .notify, .schedule])
    }

    func testThatRunningOutOfSpaceWaitsEvenWithNoRetriesLeft() throws {
        let full = TransferError(.diskFull, "full")
        let t = try XCTUnwrap(
            success(apply(.attemptEnded(.failed(full, retryAfter: nil)), job(.running, retriesUsed: 2, retryLimit: 2))))
        XCTAssertEqual(t.patch.state, .waiting)
        XCTAssertEqual(t.patch.waitReason, .some(.disk))
    }

    func testThatAnUploadWithRetries0FailsOnAFullDiskInsteadOfBeingSentAgain() throws {
        var upload = job(.running, retryLimit: 0)
        upload.kind = .upload
        let full = TransferError(.diskFull, "cannot write /d/r.json.aftpart: No space left on device")
        let t = try XCTUnwrap(success(apply(.attemptEnded(.failed(full, retryAfter: nil)), upload)))
        XCTAssertEqual(t.patch.state, .failed)
        XCTAssertEqual(t.patch.error??.code, .diskFull)
        XCTAssertEqual(t.patch.error??.retryable, false)
        XCTAssertTrue(t.patch.error??.message.hasSuffix("not sent again (--retries 0)") ?? false)
        // A download with --retries 0 still waits: waiting re-asks for bytes, it sends nothing.
        let download = try XCTUnwrap(
            success(apply(.attemptEnded(.failed(full, retryAfter: nil)), job(.running, retryLimit: 0))))
        XCTAssertEqual(download.patch.state, .waiting)
    }

    func testThatFreeSpaceQueuesOnlyAJobWaitingForDisk() throws {
        let t = try XCTUnwrap(success(apply(.diskSpaceChanged, job(.waiting, waitReason: .disk))))
        XCTAssertEqual(t.patch.state, .queued)
        XCTAssertEqual(t.patch.waitReason, .some(nil))
        XCTAssertEqual(t.actions, [.notify, .schedule])
        for reason in [WaitReason.backoff, .offline] {
            if case .success = apply(.diskSpaceChanged, job(.waiting, waitReason: reason)) {
                XCTFail("diskSpaceChanged applied to a job waiting for \(reason)")
            }
        }
        if case .success = apply(.retryDue, job(.waiting, waitReason: .disk)) {
            XCTFail("a retry timer started a job waiting for disk")
        }
        if case .success = apply(.networkReturned, job(.waiting, waitReason: .disk)) {
            XCTFail("the network started a job waiting for disk")
        }
    }

    func testThatAJobWaitingForDiskCanBePausedAndCancelled() throws {
        let p = try XCTUnwrap(success(apply(.pause, job(.waiting, waitReason: .disk))))
        XCTAssertEqual(p.patch.state, .paused)
        XCTAssertEqual(p.patch.waitReason, .some(nil))
        let c = try XCTUnwrap(success(apply(.cancel, job(.waiting, waitReason: .disk))))
        XCTAssertEqual(c.patch.state, .cancelled)
    }
}
