import XCTest

@testable import aftransfer

final class HumanFormatTests: XCTestCase {
    func testThatSizesBelowOneKibibyteAreShownInBytes() {
        XCTAssertEqual(HumanFormat.bytes(0), "0 B")
        XCTAssertEqual(HumanFormat.bytes(1023), "1023 B")
    }

    func testThatSizesAreShownInPowersOf1024WithOneDecimal() {
        XCTAssertEqual(HumanFormat.bytes(1024), "1.0 KiB")
        XCTAssertEqual(HumanFormat.bytes(1536), "1.5 KiB")
        XCTAssertEqual(HumanFormat.bytes(12_897_485), "12.3 MiB")
        XCTAssertEqual(HumanFormat.bytes(5 * 1024 * 1024 * 1024), "5.0 GiB")
    }

    func testThatASizeThatWouldRoundTo1024OfAUnitIsShownInTheNextUnit() {
        XCTAssertEqual(HumanFormat.bytes(1024 * 1024 - 1), "1.0 MiB")
    }

    func testThatRatesAreSizesPerSecondAndZeroOrNonsenseIsZero() {
        XCTAssertEqual(HumanFormat.rate(4.5 * 1024 * 1024), "4.5 MiB/s")
        XCTAssertEqual(HumanFormat.rate(0), "0 B/s")
        XCTAssertEqual(HumanFormat.rate(-3), "0 B/s")
        XCTAssertEqual(HumanFormat.rate(.infinity), "0 B/s")
        XCTAssertEqual(HumanFormat.rate(.nan), "0 B/s")
    }

    func testThatDurationsUseTheTwoLargestUnitsAndRoundUp() {
        XCTAssertEqual(HumanFormat.duration(0), "0s")
        XCTAssertEqual(HumanFormat.duration(6.2), "7s")
        XCTAssertEqual(HumanFormat.duration(65), "1m05s")
        XCTAssertEqual(HumanFormat.duration(2 * 3600 + 3 * 60), "2h03m")
        XCTAssertEqual(HumanFormat.duration(3 * 86400 + 4 * 3600), "3d04h")
    }

    func testThatAnUnknownOrNegativeDurationIsTwoDashes() {
        XCTAssertEqual(HumanFormat.duration(nil), "--")
        XCTAssertEqual(HumanFormat.duration(-1), "--")
        XCTAssertEqual(HumanFormat.duration(.infinity), "--")
        // An outside audit: a stalled transfer's ETA of 9.6e18 s trapped converting to Int64.
        XCTAssertEqual(HumanFormat.duration(9.57e18), "--")
        XCTAssertEqual(HumanFormat.duration(5.69e19), "--")
        XCTAssertEqual(HumanFormat.rate(1e30), HumanFormat.rate(Double(Int64.max / 2)))
    }

    func testThatPercentagesRoundDownAndNeverShowOneHundredBeforeTheEnd() {
        XCTAssertEqual(HumanFormat.percent(0.456), "45%")
        XCTAssertEqual(HumanFormat.percent(0.9999), "99.9%")
        XCTAssertEqual(HumanFormat.percent(1), "100%")
        XCTAssertEqual(HumanFormat.percent(1.5), "100%")
        XCTAssertEqual(HumanFormat.percent(nil), "--")
    }

    func testThatTimingsBelowASecondAreInMillisecondsAndAboveInSeconds() {
        XCTAssertEqual(HumanFormat.timing(0.0012), "1ms")
        XCTAssertEqual(HumanFormat.timing(1.2), "1.20s")
        XCTAssertEqual(HumanFormat.timing(nil), "-")
    }

    func testThatControlCharactersArePrintedVisiblyNeverAsThemselves() {
        XCTAssertEqual(HumanFormat.printable("plain é ✓"), "plain é ✓")
        XCTAssertEqual(HumanFormat.printable("\u{1B}]0;pwned\u{07}x\u{1B}[2J"), "^[]0;pwned^Gx^[[2J")
        XCTAssertEqual(HumanFormat.printable("a\tb\r\nc\u{7F}\u{9B}31m"), "a^Ib^M^Jc^?\u{FFFD}31m")
        XCTAssertEqual(
            HumanFormat.printable("job 1: x\u{1B}[2J\njob 2: y", keepingNewlines: true), "job 1: x^[[2J\njob 2: y")
    }
}
