import XCTest

@testable import TransferBase
@testable import TransferCore

final class SchedulerTests: XCTestCase {
    private func facts(_ id: Int64, _ state: TransferState = .queued, priority: Int = 0, dest: String? = nil)
        -> JobFacts
    {
        JobFacts(id: id, kind: .download, state: state, priority: priority, destination: dest ?? "/d/\(id)")
    }

    private func patch(_ state: TransferState) -> JobPatch {
        var p = JobPatch()
        p.state = state
        return p
    }

    func testThatHigherPriorityStartsFirstThenTheOldest() {
        var s = Scheduler()
        s.add(facts(3))
        s.add(facts(1, priority: -1))
        s.add(facts(2, priority: 5))
        s.add(facts(4))
        XCTAssertEqual(s.queuedInOrder(), [2, 3, 4, 1])
        var order: [Int64] = []
        while let id = s.popNext() {
            order.append(id)
            s.apply(patch(.running), to: id)
        }
        XCTAssertEqual(order, [2, 3, 4, 1])
    }

    func testThatARequeuedJobTakesItsPlaceByAgeAndStaleEntriesAreSkipped() {
        var s = Scheduler()
        for id in 1...3 { s.add(facts(Int64(id))) }
        XCTAssertEqual(s.popNext(), 1)
        s.apply(patch(.running), to: 1)
        s.apply(patch(.paused), to: 2)  // its queue entry goes stale
        s.apply(patch(.queued), to: 1)  // back, older than 3
        XCTAssertEqual(s.popNext(), 1)
        s.apply(patch(.running), to: 1)
        XCTAssertEqual(s.popNext(), 3)
        s.apply(patch(.running), to: 3)
        XCTAssertNil(s.popNext())
        s.apply(patch(.queued), to: 2)
        XCTAssertEqual(s.popNext(), 2)
    }

    /// A job taken for a standby attempt (``Engine+Standby``) and dropped goes back to its place;
    /// `peekNext` skips stale entries without taking the job; `startsBefore` is the queue's order.
    func testThatAJobTakenAndPutBackKeepsItsPlaceAndPeekingTakesNothing() {
        var s = Scheduler()
        for id in 1...3 { s.add(facts(Int64(id))) }
        s.add(facts(4, priority: 2))
        XCTAssertEqual(s.peekNext(), 4)
        XCTAssertEqual(s.peekNext(), 4, "peeking takes nothing")
        XCTAssertEqual(s.popNext(), 4)
        XCTAssertEqual(s.peekNext(), 1)
        s.putBack(4)
        XCTAssertEqual(s.popNext(), 4, "put back at its priority")
        XCTAssertEqual(s.popNext(), 1)
        s.apply(patch(.paused), to: 1)
        s.putBack(1)  // no longer queued: not put back
        XCTAssertEqual(s.popNext(), 2)
        s.apply(patch(.paused), to: 3)  // its entry goes stale
        XCTAssertNil(s.peekNext())
        XCTAssertNil(s.popNext())
        XCTAssertTrue(s.startsBefore(4, 2), "higher priority first")
        XCTAssertTrue(s.startsBefore(2, 5) == false && s.startsBefore(5, 2) == false, "an unknown job never does")
        s.add(facts(6))
        XCTAssertTrue(s.startsBefore(2, 6) && !s.startsBefore(6, 2), "then the oldest")
        XCTAssertFalse(s.startsBefore(2, 2))
    }

    /// A free slot goes to the standby that starts first, unless a job queued since outranks it:
    /// then that job starts and the standby is given up (put back, it waits its turn again).
    func testThatAFreeSlotGoesToAStandbyUnlessTheQueueHoldsAJobThatStartsBeforeIt() {
        var s = Scheduler()
        for id in 1...4 { s.add(facts(Int64(id))) }
        XCTAssertEqual(s.popNext(), 1)
        XCTAssertEqual(s.popNext(), 2)  // 1 and 2 stand by
        let first = s.next(standing: [2, 1])
        XCTAssertEqual(first?.id, 1)
        XCTAssertNil(first?.dropped)
        XCTAssertEqual(s.peekNext(), 3, "a standby's start takes nothing off the queue")
        s.add(facts(5, priority: 1))  // queued since, outranks both
        let next = s.next(standing: [2])
        XCTAssertEqual(next?.id, 5)
        XCTAssertEqual(next?.dropped, 2)
        s.apply(patch(.running), to: 5)
        s.putBack(2)
        let again = s.next(standing: [Int64]())
        XCTAssertEqual(again?.id, 2, "given up, it is next in the queue again")
        XCTAssertNil(again?.dropped)
        s.apply(patch(.running), to: 2)
        XCTAssertEqual(s.next(standing: [Int64]())?.id, 3)
        XCTAssertEqual(s.next(standing: [Int64]())?.id, 4)
        XCTAssertNil(s.next(standing: [Int64]()))
    }

    func testThatCountsFollowEveryChangeIncludingUntrackedStates() {
        var s = Scheduler(untrackedCounts: [.completed: 10])
        s.add(facts(1))
        s.add(facts(2))
        s.apply(patch(.running), to: 1)
        s.apply(patch(.completed), to: 1)
        XCTAssertEqual(s.counts[.completed], 11)
        XCTAssertEqual(s.counts[.queued], 1)
        XCTAssertEqual(s.counts[.running], 0)
        XCTAssertNil(s.facts[1])
        s.remove(2, state: .queued)
        XCTAssertEqual(s.counts[.queued], 0)
        // A completed job retried from the store is tracked again.
        s.apply(patch(.queued), to: 9, loaded: facts(9, .completed))
        XCTAssertEqual(s.counts[.completed], 10)
        XCTAssertEqual(s.popNext(), 9)
    }

    /// Unfinished jobs hold their path; a failed download only with data to resume.
    func testThatDestinationsAreHeldByUnfinishedAndResumableFailedJobsOnly() {
        var s = Scheduler()
        s.add(facts(1, dest: "/d/x"))
        XCTAssertEqual(s.holder(of: "/d/x"), 1)
        XCTAssertNil(s.holder(of: "/d/x", except: 1))
        var kept = patch(.failed)
        kept.durableBytes = 4096
        s.apply(kept, to: 1)
        XCTAssertEqual(s.holder(of: "/d/x"), 1, "a part to resume")
        s.apply(patch(.cancelled), to: 1)
        XCTAssertNil(s.holder(of: "/d/x"))
        // Failed with nothing kept: its retry starts from zero, the path is free; retried, it
        // holds it again.
        s.add(facts(3, dest: "/d/z"))
        s.apply(patch(.failed), to: 3)
        XCTAssertNil(s.holder(of: "/d/z"))
        s.apply(patch(.queued), to: 3)
        XCTAssertEqual(s.holder(of: "/d/z"), 3)
        var ranges = patch(.failed)
        ranges.segments = .some("ranges")
        s.apply(ranges, to: 3)
        XCTAssertEqual(s.holder(of: "/d/z"), 3, "ranges to resume")
        var named = JobPatch()
        named.destination = .some("/d/y")
        s.add(JobFacts(id: 2, kind: .download, state: .running, priority: 0, destination: nil))
        s.apply(named, to: 2)
        XCTAssertEqual(s.holder(of: "/d/y"), 2)
    }

    func testThatDeadlinesComeDueInOrderAndDisarmedOnesNever() {
        var s = Scheduler()
        for id in 1...3 { s.add(facts(Int64(id), .waiting)) }
        s.arm(1, at: 30)
        s.arm(2, at: 10)
        s.arm(3, at: 20)
        s.disarm(3)
        XCTAssertEqual(s.nextDeadline(), 10)
        XCTAssertEqual(s.takeDue(now: 25), [2])
        XCTAssertEqual(s.nextDeadline(), 30)
        s.arm(1, at: 5)  // moved earlier: the old entry is stale
        XCTAssertEqual(s.takeDue(now: 100), [1])
        XCTAssertNil(s.nextDeadline())
    }

    func testThatChoosingAmongManyQueuedJobsStaysCheap() {
        var s = Scheduler()
        for id in 1...100_000 { s.add(facts(Int64(id), priority: id % 3)) }
        var started = 0
        while started < 1000, let id = s.popNext() {
            s.apply(patch(.running), to: id)
            started += 1
        }
        XCTAssertEqual(started, 1000)
        XCTAssertEqual(s.counts[.queued], 99_000)
        XCTAssertEqual(s.facts.values.filter { $0.state == .running }.allSatisfy { $0.priority == 2 }, true)
    }
}
