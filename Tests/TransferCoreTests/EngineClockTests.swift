import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

/// How far the fake wall clock is set from the real one (seconds); the monotonic clock is real.
nonisolated(unsafe) private var wallOffset = 0.0

/// Retry timers run on the monotonic clock (``EngineClock``): setting the wall clock back or
/// forward neither fires nor stalls them; the job object's times stay wall clock.
final class EngineClockTests: XCTestCase {
    private let fake = EngineClock(
        wall: { Timestamp.now() + wallOffset }, monotonic: { BatchAssembler.monotonicSeconds() })

    override func setUp() { wallOffset = 0 }
    override func tearDown() { wallOffset = 0 }

    func testThatAMonotonicDeadlineIgnoresAWallClockJump() {
        let deadline = fake.monotonicDeadline(wallAt: fake.wall() + 10)
        wallOffset = -3600
        let left = deadline - fake.monotonic()
        XCTAssertEqual(left, 10, accuracy: 0.5, "set back an hour, the deadline is still 10 s away")
        let shown = fake.wallTime(ofMonotonic: deadline)
        XCTAssertEqual(shown - fake.wall(), 10, accuracy: 0.5, "nextRetryAt: wall now plus what is left")
        var s = Scheduler()
        s.add(JobFacts(id: 1, kind: .download, state: .waiting, priority: 0, destination: nil, waitReason: .backoff))
        s.arm(1, at: deadline)
        wallOffset = 3600
        XCTAssertEqual(s.takeDue(now: fake.monotonic()), [], "set forward an hour, nothing fires early")
        XCTAssertEqual(s.takeDue(now: deadline), [1])
    }

    /// A real engine: a download to a closed port fails, waits 0.5 s on a retry timer, and the
    /// wall clock is set back an hour meanwhile. The retry still comes about half a second later.
    func testThatARetryTimerFiresOnTimeWhenTheWallClockIsSetBack() throws {
        let dir = FileManager.default.temporaryDirectory.appendingPathComponent("aft-clock-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: dir) }
        let loop = try EventLoop()
        let store = try JobStore(path: dir.appendingPathComponent("t.sqlite").path)
        let engine = try Engine(loop: loop, store: store, config: EngineConfig())
        engine.clock = fake
        engine.jitter = { 0 }
        try engine.recover()
        engine.start()
        var request = TransferRequest(url: "http://127.0.0.1:1/x")
        request.destination = dir.appendingPathComponent("x").path
        let id = try engine.add(request).id
        var jumped = false
        var attemptsAfterJump: Int?
        let watch = LoopTimer(loop: loop)
        let started = BatchAssembler.monotonicSeconds()
        watch.start(after: 20, repeating: 20) {
            guard let job = engine.job(id) else { return }
            if !jumped, job.state == .waiting {
                jumped = true
                wallOffset = -3600
                attemptsAfterJump = job.attempts
            }
            let elapsed = BatchAssembler.monotonicSeconds() - started
            if let before = attemptsAfterJump, job.attempts > before || elapsed > 4 {
                watch.stop()
                engine.shutdown()
                loop.stop()
            }
        }
        loop.run()
        watch.close()
        let job = try XCTUnwrap(engine.job(id))
        XCTAssertTrue(jumped, "the job never waited on a retry timer: \(job)")
        XCTAssertGreaterThan(job.attempts, attemptsAfterJump ?? .max, "the retry stalled after the clock was set back")
        XCTAssertLessThan(BatchAssembler.monotonicSeconds() - started, 3.5)
    }
}
