import XCTest

@testable import aftransfer

final class JobIdScannerTests: XCTestCase {
    private func scan(_ text: String, chunk: Int = 7) -> [Int64]? {
        var s = JobIdScanner()
        let bytes = Array(text.utf8)
        var i = 0
        while i < bytes.count {
            let end = min(bytes.count, i + chunk)
            bytes[i..<end].withUnsafeBytes { s.feed($0) }
            i = end
        }
        return s.ids
    }

    func testThatIdsOfEveryJobComeOutInOrderWhateverTheChunking() {
        let text =
            #"{"jobs":[{"attempts":0,"history":[{"attempt":1,"id":99}],"id":12,"url":"http://x/\"id\":7"},"#
            + #"{"error":{"code":"io","id":5},"id":13,"kind":"download"}]}"#
        for chunk in [1, 2, 5, 64, 1000] {
            XCTAssertEqual(scan(text, chunk: chunk), [12, 13], "chunk \(chunk)")
        }
    }

    func testThatAStringValueThatReadsIdIsNotAKey() {
        XCTAssertEqual(scan(#"{"jobs":[{"url":"id","id":3,"x":"id"}]}"#), [3])
    }

    /// A job removed before the daemon wrote its object is `null` (`docs/rpc.md`): its id is
    /// implied by its place among the batch's consecutive ids.
    func testThatANullElementGetsTheIdItsPlaceImplies() {
        for chunk in [1, 3, 64] {
            XCTAssertEqual(scan(#"{"jobs":[{"id":7},null,{"id":9},null]}"#, chunk: chunk), [7, 8, 9, 10])
            XCTAssertEqual(scan(#"{"jobs":[null, null,{"id":9}]}"#, chunk: chunk), [7, 8, 9])
        }
    }

    func testThatAnEmptyListHasNoIds() {
        XCTAssertEqual(scan(#"{"jobs":[]}"#), [])
    }

    func testThatAnUnfinishedOrMalformedResultHasNoAnswer() {
        XCTAssertNil(scan(#"{"jobs":[{"id":1}"#))
        XCTAssertNil(scan(#"{"jobs":[{"id":"one"}]}"#))
    }

    func testThatItAgreesWithTheDecoderOnARealJobObject() throws {
        let job = JobFixture.job(id: 4242, state: .queued)
        let data = try JSONEncoder().encode(["jobs": [job, job]])
        XCTAssertEqual(scan(String(decoding: data, as: UTF8.self)), [4242, 4242])
    }
}
