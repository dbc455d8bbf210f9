import XCTest

@testable import TransferBase
@testable import TransferCore

/// The daily timetable of download limits, with the clock and time zone injected.
final class BandwidthScheduleTests: XCTestCase {
    private let utc = TimeZone(identifier: "UTC")!
    private let berlin = TimeZone(identifier: "Europe/Berlin")!

    /// 2026-11-23 at `h:m` UTC.
    private func at(_ h: Int, _ m: Int) -> Date {
        Date(timeIntervalSince1970: 1_763_856_000 + Double(h * 3600 + m * 60))
    }

    func testThatEachEntryAppliesFromItsTimeOnUntilTheNext() throws {
        let s = try XCTUnwrap(BandwidthSchedule.parse("08:00,512K 19:00,off"))
        XCTAssertEqual(s.rate(at: at(8, 0), timeZone: utc), 512 * 1024)
        XCTAssertEqual(s.rate(at: at(18, 59), timeZone: utc), 512 * 1024)
        XCTAssertNil(s.rate(at: at(19, 0), timeZone: utc))
        XCTAssertNil(s.rate(at: at(23, 59), timeZone: utc))
    }

    func testThatBeforeTheFirstEntryTheDayBeforesLastEntryApplies() throws {
        let s = try XCTUnwrap(BandwidthSchedule.parse("19:00,1M 08:00,2M"))
        XCTAssertEqual(s.rate(at: at(3, 0), timeZone: utc), 1 << 20)
        XCTAssertEqual(s.rate(at: at(7, 59), timeZone: utc), 1 << 20)
        XCTAssertEqual(s.rate(at: at(8, 0), timeZone: utc), 2 << 20)
        XCTAssertEqual(s.text, "08:00,2M 19:00,1M")
    }

    func testThatTimesAreLocalTime() throws {
        let s = try XCTUnwrap(BandwidthSchedule.parse("08:00,512K 19:00,off"))
        // 07:30 UTC is 08:30 in Berlin (CET, UTC+1, in November).
        XCTAssertNil(s.rate(at: at(7, 30), timeZone: utc))
        XCTAssertEqual(s.rate(at: at(7, 30), timeZone: berlin), 512 * 1024)
    }

    func testThatMalformedSchedulesAreRefused() {
        for bad in [
            "", " ", "08:00", "08:00,", ",1M", "24:00,1M", "08:60,1M", "8:0,1M", "08:00,0", "08:00,fast",
            "08:00,1M 08:00,2M", "08:00;1M", "-1:00,1M", "08:00,1M,2M",
        ] {
            XCTAssertNil(BandwidthSchedule.parse(bad), bad)
        }
        XCTAssertNotNil(BandwidthSchedule.parse("8:05,1.5M"))
    }

    /// Found by an outside audit: a repeated time was refused as "not a schedule of 'HH:MM,RATE'
    /// entries", though each entry was well formed.
    func testThatARefusalSaysWhatIsWrong() {
        func reason(_ text: String) -> String? {
            if case .failure(let r) = BandwidthSchedule.parsed(text) { return r.reason }
            return nil
        }
        XCTAssertEqual(reason("08:00,1M 8:00,2M"), "\"8:00\" is given twice")
        XCTAssertEqual(reason("24:00,1M"), "\"24:00\" is not a time from 00:00 to 23:59")
        XCTAssertEqual(reason("08:00,fast"), "\"fast\" is not a rate (or off)")
        XCTAssertEqual(reason("08:00"), "\"08:00\" is not HH:MM,RATE")
        XCTAssertEqual(reason(" "), "no entries")
        XCTAssertNil(reason("08:00,1M 19:00,off"))
    }

    func testThatTheGovernorFollowsTheScheduleOfAnInjectedClock() throws {
        let g = BandwidthGovernor()
        g.timeZone = utc
        var now = at(7, 59)
        g.clock = { now }
        g.set(try BandwidthLimits().changed(download: nil, upload: nil, schedule: "08:00,1M 19:00,off"), now: 0)
        XCTAssertNil(g.inForce.download)
        now = at(8, 0)
        g.refresh(now: 1000)
        XCTAssertEqual(g.inForce, LimitsInForce(download: 1 << 20, upload: nil, schedule: "08:00,1M 19:00,off"))
        now = at(19, 30)
        g.refresh(now: 2000)
        XCTAssertNil(g.inForce.download)
    }

    func testThatDownloadClearsTheScheduleAndScheduleReplacesTheFixedLimit() throws {
        var l = try BandwidthLimits().changed(download: "2M", upload: "1M", schedule: nil)
        XCTAssertEqual(l.download, 2 << 20)
        l = try l.changed(download: nil, upload: nil, schedule: "00:00,512K")
        XCTAssertNil(l.download)
        XCTAssertEqual(l.downloadRate(at: at(12, 0), timeZone: utc), 512 * 1024)
        l = try l.changed(download: "3M", upload: nil, schedule: nil)
        XCTAssertNil(l.schedule)
        XCTAssertEqual(l.upload, 1 << 20)
        l = try l.changed(download: nil, upload: "off", schedule: "off")
        XCTAssertEqual(l, BandwidthLimits(download: 3 << 20))
        XCTAssertThrowsError(try l.changed(download: "x", upload: nil, schedule: nil))
        XCTAssertThrowsError(try l.changed(download: "1M", upload: nil, schedule: "00:00,2M"), "both: refused")
        XCTAssertEqual(try l.changed(download: "1M", upload: nil, schedule: "off"), BandwidthLimits(download: 1 << 20))
    }

    func testThatASharedBudgetLetsThroughItsRateAndNoMore() {
        let b = ByteBudget()
        b.setRate(1_000_000, now: 0)
        var passed = 0
        // Three takers of 64 KiB chunks over 10 simulated seconds, 1 ms steps.
        let objects = (0..<3).map { _ in NSObject() }  // kept alive: distinct identifiers
        let takers = objects.map(ObjectIdentifier.init)
        for ms in stride(from: UInt64(0), to: 10_000, by: 1) {
            for t in takers where b.delay(now: ms, for: t) == 0 {
                b.take(65_536, by: t)
                passed += 65_536
            }
        }
        XCTAssertEqual(Double(passed), 10_000_000, accuracy: 300_000)
        b.setRate(nil, now: 10_000)
        XCTAssertEqual(b.delay(now: 10_000, for: takers[0]), 0)
        withExtendedLifetime(objects) {}
    }

    /// A taker that always asks first (a segmented download whose timer fires first) no longer
    /// takes every byte: once refused, the one waiting longest goes next.
    func testThatTakersRefusedTakeTurns() {
        let b = ByteBudget()
        b.setRate(1_000_000, now: 0)
        let objects = [NSObject(), NSObject()]  // kept alive: distinct identifiers
        let greedy = ObjectIdentifier(objects[0])
        let other = ObjectIdentifier(objects[1])
        var got: [ObjectIdentifier: Int] = [greedy: 0, other: 0]
        var due: [ObjectIdentifier: UInt64] = [greedy: 0, other: 0]
        for ms in stride(from: UInt64(0), to: 10_000, by: 1) {
            // The greedy one asks first whenever both are due, and asks again at once after a take.
            for t in [greedy, other] where due[t]! <= ms {
                var wait = b.delay(now: ms, for: t)
                while wait == 0 {
                    b.take(16_384, by: t)
                    got[t]! += 16_384
                    wait = b.delay(now: ms, for: t)
                }
                due[t] = ms + wait
            }
        }
        let share = Double(got[other]!) / Double(got[greedy]! + got[other]!)
        XCTAssertEqual(share, 0.5, accuracy: 0.1, "\(got)")
        XCTAssertEqual(Double(got[greedy]! + got[other]!), 10_000_000, accuracy: 300_000)
        withExtendedLifetime(objects) {}
    }

    /// A waiter that went away without a word does not hold the others back for long.
    func testThatAWaiterThatNeverComesBackIsForgotten() {
        let b = ByteBudget()
        b.setRate(1_000_000, now: 0)
        let objects = [NSObject(), NSObject()]  // kept alive: distinct identifiers
        let gone = ObjectIdentifier(objects[0])
        let other = ObjectIdentifier(objects[1])
        b.take(100_000, by: other)  // in debt; `gone` has taken less: its turn comes first
        XCTAssertGreaterThan(b.delay(now: 0, for: gone), 0)
        XCTAssertGreaterThan(b.delay(now: 1, for: other), 0)
        // Out of debt at 100 ms: `gone` was due then and never asks; `other` gets its turn by
        // 100 ms + the grace.
        var ms: UInt64 = 101
        while b.delay(now: ms, for: other) != 0 { ms += 1 }
        XCTAssertLessThanOrEqual(ms, 100 + ByteBudget.waiterGrace + 2)
        b.forget(other)
        withExtendedLifetime(objects) {}
    }
}
