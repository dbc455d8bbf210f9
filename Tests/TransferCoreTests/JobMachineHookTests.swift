import XCTest

@testable import TransferBase
@testable import TransferCore

/// `--on-end` hooks and `set-url` in ``JobMachine``: the hook to run is recorded with the ending.
final class JobMachineHookTests: XCTestCase {
    private func job(_ state: TransferState, hasOnEnd: Bool = true, kind: JobKind = .download) -> JobFacts {
        JobFacts(id: 9, kind: kind, state: state, priority: 0, destination: "/d/f", attempts: 1, hasOnEnd: hasOnEnd)
    }

    private func apply(_ event: JobEvent, _ f: JobFacts, daemonHook: Bool = false) -> JobTransition? {
        if case .success(let t) = JobMachine.transition(event, f, MachineContext(now: 5, daemonHook: daemonHook)) {
            return t
        }
        return nil
    }

    func testThatEveryEndingRecordsTheJobsHookInTheSamePatchAndAsksToRunIt() throws {
        let endings: [(JobEvent, TransferState)] = [
            (.attemptEnded(.completed(sha256: "x", bytes: 1)), .running),
            (.attemptEnded(.failed(TransferError(.httpStatus, "404", retryable: false), retryAfter: nil)), .running),
            (.cancel, .running), (.cancel, .queued), (.cancel, .paused), (.cancel, .waiting),
            (.recovered(fileInPlace: true), .running),
        ]
        for (event, state) in endings {
            let t = try XCTUnwrap(apply(event, job(state)), "\(event) in \(state)")
            XCTAssertTrue(t.patch.state?.isFinal == true)
            XCTAssertEqual(t.patch.hookPending, .some(.job), "\(event)")
            XCTAssertEqual(t.patch.hook, .some(nil), "the last ending's result is cleared")
            XCTAssertEqual(t.actions.last, .runHook)
        }
    }

    func testThatTheDaemonsHookIsRecordedWhenTheJobHasNoneAndNothingWithoutEither() throws {
        let completed = JobEvent.attemptEnded(.completed(sha256: "x", bytes: 1))
        let t = try XCTUnwrap(apply(completed, job(.running, hasOnEnd: false), daemonHook: true))
        XCTAssertEqual(t.patch.hookPending, .some(.daemon))
        let none = try XCTUnwrap(apply(completed, job(.running, hasOnEnd: false)))
        XCTAssertTrue(none.patch.hookPending == nil)
        XCTAssertFalse(none.actions.contains(.runHook))
    }

    func testThatARetryableFailureIsNotAnEndingAndRunsNoHook() throws {
        let t = try XCTUnwrap(
            apply(
                .attemptEnded(.failed(TransferError(.network, "reset", retryable: true), retryAfter: nil)),
                job(.running)))
        XCTAssertEqual(t.patch.state, .waiting)
        XCTAssertTrue(t.patch.hookPending == nil)
        XCTAssertFalse(t.actions.contains(.runHook))
    }

    func testThatTheJobsHookFinishingRecordsItsResultAndHandsOverToTheDaemonsHook() throws {
        let result = HookResult(exitStatus: 3, output: "no")
        let t = try XCTUnwrap(apply(.hookFinished(.job, result), job(.completed), daemonHook: true))
        XCTAssertEqual(t.patch.hook, .some(result))
        XCTAssertEqual(t.patch.hookPending, .some(.daemon))
        XCTAssertEqual(t.actions, [.notify, .runHook])
        XCTAssertNil(t.patch.state, "a hook never changes the job's state")
        let last = try XCTUnwrap(apply(.hookFinished(.daemon, HookResult(exitStatus: 0, output: "")), job(.completed)))
        XCTAssertTrue(last.patch.hook == nil, "the job's own hook is the one its field shows")
        XCTAssertEqual(last.patch.hookPending, .some(nil))
        XCTAssertEqual(last.actions, [.notify])
        let only = try XCTUnwrap(
            apply(.hookFinished(.daemon, HookResult(exitStatus: 1, output: "x")), job(.failed, hasOnEnd: false)))
        XCTAssertEqual(only.patch.hook, .some(HookResult(exitStatus: 1, output: "x")))
        let gone = try XCTUnwrap(apply(.hookFinished(.daemon, nil), job(.completed, hasOnEnd: false)))
        XCTAssertTrue(gone.patch.hook == nil)
        XCTAssertEqual(gone.patch.hookPending, .some(nil))
    }

    func testThatARetryLeavesTheHookItsEndingStillOwesToARecordOfItsOwn() throws {
        for state in [TransferState.failed, .cancelled] {
            for stage in [HookStage.job, .daemon] {
                var f = job(state)
                f.hookPending = stage
                let t = try XCTUnwrap(apply(.retry, f), "\(state) \(stage)")
                XCTAssertEqual(t.patch.state, .queued)
                XCTAssertEqual(t.patch.hookPending, .some(nil), "the next ending's record cannot take its place")
                XCTAssertEqual(t.actions, [.keepHook(stage, ending: nil), .notify, .schedule])
            }
            let plain = try XCTUnwrap(apply(.retry, job(state)))
            XCTAssertTrue(plain.patch.hookPending == nil)
            XCTAssertEqual(plain.actions, [.notify, .schedule])
        }
    }

    func testThatSetURLKeepsTheStateOfQueuedPausedWaitingAndFailedDownloads() throws {
        for state in [TransferState.queued, .paused, .waiting, .failed] {
            let t = try XCTUnwrap(apply(.setURL("http://new/x", keepPart: true), job(state)))
            XCTAssertNil(t.patch.state)
            XCTAssertEqual(t.patch.url, "http://new/x")
            XCTAssertNil(t.patch.durableBytes, "the part is kept")
            XCTAssertEqual(t.actions, [.notify])
            let dropped = try XCTUnwrap(apply(.setURL("http://new/x", keepPart: false), job(state)))
            XCTAssertEqual(dropped.patch.durableBytes, 0)
            XCTAssertEqual(dropped.actions, [.deletePart, .notify])
        }
    }

    func testThatSetURLIsRefusedForRunningAndEndedJobsAndUploads() {
        for state in [TransferState.running, .completed, .cancelled] {
            XCTAssertNil(apply(.setURL("http://new/x", keepPart: true), job(state)), "\(state)")
        }
        XCTAssertNil(apply(.setURL("http://new/x", keepPart: true), job(.paused, kind: .upload)))
    }
}
