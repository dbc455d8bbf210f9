import XCTest

@testable import aftransfer

/// Ids by the thousand are kept from the argument parser (``ManyIds``): the first 64 stay for it,
/// the rest are taken in order; option values, `--` and anything not a plain id stay.
final class ManyIdsTests: XCTestCase {
    func testThatIdsPastTheFirst64AreTakenInOrderAndTheRestStays() {
        let ids = (1...200).map(String.init)
        let head = ["wait", "--timeout", "5"] + ids.prefix(100)
        let args = head + ["--home", "7"] + ids.dropFirst(100) + ["--", "300"]
        let kept = ManyIds.take(from: args)
        XCTAssertEqual(kept, ["wait", "--timeout", "5"] + ids.prefix(64) + ["--home", "7", "--", "300"])
        XCTAssertEqual(ManyIds.all([1]), [1] + (65...200).map(Int64.init))
    }

    func testThatOtherCommandsAndOddValuesAreLeftToTheParser() {
        let many = (1...100).map(String.init)
        XCTAssertEqual(ManyIds.take(from: ["list"] + many), ["list"] + many)
        let odd = many + ["-5", "x", "99999999999999999999", ""]
        XCTAssertEqual(ManyIds.take(from: ["status"] + odd), ["status"] + odd)
    }
}
