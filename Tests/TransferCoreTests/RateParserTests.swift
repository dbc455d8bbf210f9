import XCTest

@testable import TransferBase
@testable import TransferCore

final class RateParserTests: XCTestCase {
    func testThatUnitsArePowersOf1024() {
        XCTAssertEqual(RateParser.parse("500K"), 512_000)
        XCTAssertEqual(RateParser.parse("2M"), 2_097_152)
        XCTAssertEqual(RateParser.parse("1G"), 1_073_741_824)
        XCTAssertEqual(RateParser.parse("1T"), 1_099_511_627_776)
    }

    func testThatAPlainNumberIsBytesPerSecond() {
        XCTAssertEqual(RateParser.parse("1024"), 1024)
        XCTAssertEqual(RateParser.parse("1"), 1)
        XCTAssertEqual(RateParser.parse("1024B"), 1024)
    }

    func testThatUnitsAreCaseInsensitiveAndMayEndInBOrIB() {
        XCTAssertEqual(RateParser.parse("500k"), 512_000)
        XCTAssertEqual(RateParser.parse("2MB"), 2_097_152)
        XCTAssertEqual(RateParser.parse("2mb"), 2_097_152)
        XCTAssertEqual(RateParser.parse("2MiB"), 2_097_152)
        XCTAssertEqual(RateParser.parse("2kib"), 2048)
    }

    func testThatDecimalsAreAcceptedAndFractionsOfAByteAreCutOff() {
        XCTAssertEqual(RateParser.parse("1.5M"), 1_572_864)
        XCTAssertEqual(RateParser.parse("0.5K"), 512)
        XCTAssertEqual(RateParser.parse("1.1K"), 1126)
    }

    /// A fraction without a unit is a unit forgotten, not 1 byte a second (it froze downloads).
    func testThatADecimalNumberOfBytesIsRefused() {
        XCTAssertNil(RateParser.parse("1.9"))
        XCTAssertNil(RateParser.parse("1.5"))
        XCTAssertNil(RateParser.parse("100.7B"))
        XCTAssertEqual(RateParser.parse("100"), 100)
    }

    func testThatSurroundingWhitespaceIsIgnored() {
        XCTAssertEqual(RateParser.parse(" 2M "), 2_097_152)
    }

    func testThatZeroNegativeEmptyAndGarbageAreRefused() {
        for s in [
            "", " ", "0", "0K", "0.0001K", "0.5", "-1", "-5K", "+5K", "K", "B", "KB", "iB", "5X", "5KK", "5 K",
            "1e3", "inf", "nan", "0x10", ".5K", "5.K", "1.2.3", "5iB", "abc", "5K/s",
        ] {
            XCTAssertNil(RateParser.parse(s), "\(s) should be refused")
        }
    }

    func testThatOverflowingValuesAreRefused() {
        XCTAssertNil(RateParser.parse("9223372036854775807K"))
        XCTAssertNil(RateParser.parse("99999999999999999999"))
        XCTAssertNil(RateParser.parse("9999999999.5T"))
        XCTAssertEqual(RateParser.parse("9223372036854775807"), Int64.max)
    }
}
