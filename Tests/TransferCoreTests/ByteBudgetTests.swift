import XCTest

@testable import TransferBase
@testable import TransferCore

/// ``ByteBudget``: the daemon-wide budget of one direction, shared in turns; a transfer with its
/// own `--limit-rate` below its share gets that rate inside the shared one (SPEC "Bandwidth").
final class ByteBudgetTests: XCTestCase {
    /// Two transfers drawing from one budget as ``TransferTask/pace(_:)`` does, for `seconds` of
    /// loop time in steps of a millisecond, each taking `chunk` bytes a callback; `ownRate` is the
    /// first one's `--limit-rate`. Returns the bytes per second each got.
    private func share(
        budget rate: Int64, ownRate: Double, chunk: Int, otherChunk: Int? = nil, seconds: UInt64 = 20
    ) -> (Double, Double) {
        let budget = ByteBudget()
        budget.setRate(rate, now: 0)
        var own = TokenBucket(rate: ownRate, start: 0)
        final class Taker {}
        let takers = [Taker(), Taker()]
        var next: [UInt64] = [0, 0]
        var got: [Int64] = [0, 0]
        for t in 0..<(seconds * 1000) {
            for i in [Int(t % 2), 1 - Int(t % 2)] where next[i] <= t {
                let id = ObjectIdentifier(takers[i])
                var wait = i == 0 ? own.delay(now: t) : 0
                if wait == 0 {
                    wait = budget.delay(now: t, for: id)
                } else {
                    budget.hold(id, until: t + wait)
                }
                if wait > 0 {
                    next[i] = t + wait
                    continue
                }
                let n = i == 0 ? chunk : otherChunk ?? chunk
                if i == 0 { own.take(n, now: t) }
                budget.take(n, by: id)
                got[i] += Int64(n)
                next[i] = t + 1
            }
        }
        return (Double(got[0]) / Double(seconds), Double(got[1]) / Double(seconds))
    }

    func testThatATransferLimitedBelowItsShareGetsItsOwnRateAndTheOtherTheRest() {
        for chunk in [16 * 1024, 64 * 1024] {
            let (limited, free) = share(budget: 2 << 20, ownRate: 768 * 1024, chunk: chunk)
            XCTAssertEqual(limited, 768 * 1024, accuracy: 768 * 1024 * 0.05, "chunk \(chunk)")
            XCTAssertEqual(limited + free, Double(2 << 20), accuracy: Double(2 << 20) * 0.05, "chunk \(chunk)")
        }
    }

    /// Found by an outside audit: time spent below the rate (held back by the daemon-wide limit,
    /// a slow server) was saved up without bound, and then spent at full speed.
    func testThatAnOwnLimitSavesUpAtMostASecondsWorth() {
        var own = TokenBucket(rate: 1000, start: 0)
        XCTAssertEqual(own.delay(now: 0), 0)
        own.take(500, now: 0)
        XCTAssertEqual(own.delay(now: 0), 500, "500 bytes owed at 1000 B/s")
        XCTAssertEqual(own.delay(now: 500), 0)
        // A minute without taking anything: one second's worth may pass at once, then the rate.
        var taken = 0
        while own.delay(now: 60_000) == 0 {
            own.take(100, now: 60_000)
            taken += 100
        }
        XCTAssertEqual(taken, 1100, "a second's worth and one more take")
        XCTAssertEqual(own.delay(now: 60_000), 100)
    }

    func testThatATransferLimitedAboveItsShareGetsAboutHalf() {
        let (limited, free) = share(budget: 2 << 20, ownRate: 1.5 * 1024 * 1024, chunk: 64 * 1024)
        XCTAssertEqual(limited, Double(1 << 20), accuracy: Double(1 << 20) * 0.15)
        XCTAssertEqual(free, Double(1 << 20), accuracy: Double(1 << 20) * 0.15)
    }

    /// An upload reads an eighth of a second of its own `--limit-rate` at a time (96 KiB for
    /// 768 KiB/s), one without a limit an eighth of the daemon-wide one (256 KiB for 2 MiB/s):
    /// turns counted in bytes, not in takes, give the first its own rate all the same.
    func testThatTakesOfDifferentSizesShareByBytes() {
        let (limited, free) = share(budget: 2 << 20, ownRate: 768 * 1024, chunk: 96 * 1024, otherChunk: 256 * 1024)
        XCTAssertEqual(limited, 768 * 1024, accuracy: 768 * 1024 * 0.05)
        XCTAssertEqual(limited + free, Double(2 << 20), accuracy: Double(2 << 20) * 0.05)
        let (small, large) = share(
            budget: 2 << 20, ownRate: Double(100 << 20), chunk: 16 * 1024, otherChunk: 256 * 1024)
        XCTAssertEqual(small, Double(1 << 20), accuracy: Double(1 << 20) * 0.1, "two without a limit share evenly")
        XCTAssertEqual(large, Double(1 << 20), accuracy: Double(1 << 20) * 0.1)
    }

    /// The level the turns settle at: a transfer limited below it keeps its own limit, the
    /// others split the rest evenly.
    func testThatTheFairLevelLeavesALowOwnLimitItsRateAndSplitsTheRest() {
        let m = 1024.0 * 1024
        XCTAssertEqual(BandwidthGovernor.fairLevel(of: 2 * m, caps: [nil, nil, 300 * 1024]), (2 * m - 300 * 1024) / 2)
        XCTAssertEqual(BandwidthGovernor.fairLevel(of: 2 * m, caps: [nil, nil]), m)
        XCTAssertEqual(
            BandwidthGovernor.fairLevel(of: 2 * m, caps: [3 * m, nil]), m, "a limit above the level binds nothing")
        XCTAssertEqual(BandwidthGovernor.fairLevel(of: 2 * m, caps: [100, 200]), 2 * m, "every transfer below it")
        XCTAssertEqual(BandwidthGovernor.fairLevel(of: 2 * m, caps: []), 2 * m)
    }
}
