import XCTest

@testable import TransferBase
@testable import TransferCore

/// ``RateMeter``: the smoothed rate, and 0 once nothing comes.
final class RateMeterTests: XCTestCase {
    func testThatTheRateFollowsTheBytesSmoothly() {
        var m = RateMeter()
        m.sample(bytes: 0, now: 0)
        m.sample(bytes: 1000, now: 1000)
        XCTAssertEqual(m.value, 1000)
        m.sample(bytes: 3000, now: 2000)
        XCTAssertEqual(m.value, 1000 * 0.7 + 2000 * 0.3, accuracy: 0.001)
    }

    /// An outside audit: the smoothing only tended to 0 during a stall, so the ETA of a stalled
    /// transfer grew past 9.2e18 s (and the CLI trapped formatting it).
    func testThatAStalledTransfersRateReachesZero() {
        var m = RateMeter()
        m.sample(bytes: 0, now: 0)
        m.sample(bytes: 4_000_000, now: 250)
        var now: UInt64 = 250
        for _ in 0..<200 {
            now += 250
            m.sample(bytes: 4_000_000, now: now)
        }
        XCTAssertEqual(m.value, 0)
        // Bytes again: smoothed from where the average was, not taken raw.
        m.sample(bytes: 4_000_000 + 4000, now: now + 1000)
        XCTAssertEqual(m.value, 4000 * 0.3, accuracy: 1)
    }
}
