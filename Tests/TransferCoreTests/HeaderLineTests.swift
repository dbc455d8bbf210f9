import XCTest

@testable import TransferBase
@testable import TransferCore

/// `Content-Range` values as a download reads them (``HeaderLine/contentRange(_:)``): the end is
/// what tells a range answered short from one answered whole.
final class HeaderLineTests: XCTestCase {
    func testThatARangeGivesItsStartEndAndTotal() throws {
        let r = try XCTUnwrap(HeaderLine.contentRange("bytes 100-199/1000"))
        XCTAssertEqual(r.start, 100)
        XCTAssertEqual(r.end, 199)
        XCTAssertEqual(r.total, 1000)
        let unknownTotal = try XCTUnwrap(HeaderLine.contentRange("bytes 0-699999/*"))
        XCTAssertEqual(unknownTotal.end, 699_999)
        XCTAssertNil(unknownTotal.total)
    }

    func testThatAnUnsatisfiedRangeOrAnUnreadableEndHasNoEnd() throws {
        let unsatisfied = try XCTUnwrap(HeaderLine.contentRange("bytes */1000"))
        XCTAssertEqual(unsatisfied.start, -1)
        XCTAssertNil(unsatisfied.end)
        XCTAssertEqual(unsatisfied.total, 1000)
        XCTAssertNil(try XCTUnwrap(HeaderLine.contentRange("bytes 500-400/1000")).end, "an end before the start")
        XCTAssertNil(try XCTUnwrap(HeaderLine.contentRange("bytes 500-/1000")).end)
        XCTAssertNil(HeaderLine.contentRange("bytes 5-9"))
        XCTAssertNil(HeaderLine.contentRange("bytes x-9/10"))
    }
}
