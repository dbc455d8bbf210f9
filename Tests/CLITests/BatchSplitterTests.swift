import TransferBase
import XCTest

@testable import aftransfer

final class BatchSplitterTests: XCTestCase {
    func testThatAListThatFitsInOneLineIsSentAsOneMessage() throws {
        let splitter = BatchSplitter(maximumLineLength: 100)
        // 60 + 3 × 10 + 2 commas = 92.
        XCTAssertEqual(try splitter.plan(sizes: [10, 10, 10], singleOverhead: 60, partOverhead: 80), .single)
    }

    func testThatALineOfExactlyTheLimitStillFits() throws {
        let splitter = BatchSplitter(maximumLineLength: 100)
        XCTAssertEqual(try splitter.plan(sizes: [19, 20], singleOverhead: 60, partOverhead: 80), .single)
        XCTAssertNotEqual(try splitter.plan(sizes: [20, 20], singleOverhead: 60, partOverhead: 80), .single)
    }

    func testThatALargerListIsCutIntoConsecutivePartsThatEachFit() throws {
        let splitter = BatchSplitter(maximumLineLength: 100)
        // A part holds 50 + 10 + (1 + 10) × 3 = 93 bytes: four requests, a fifth would make 104.
        let plan = try splitter.plan(sizes: Array(repeating: 10, count: 10), singleOverhead: 40, partOverhead: 50)
        XCTAssertEqual(plan, .parts([0..<4, 4..<8, 8..<10]))
    }

    func testThatTheEmptyListIsOneMessage() throws {
        XCTAssertEqual(try BatchSplitter().plan(sizes: [], singleOverhead: 80, partOverhead: 100), .single)
    }

    func testThatARequestTooLargeForAnyPartIsNamedByItsIndex() {
        let splitter = BatchSplitter(maximumLineLength: 100)
        XCTAssertThrowsError(try splitter.plan(sizes: [10, 60, 10], singleOverhead: 30, partOverhead: 50)) {
            XCTAssertEqual($0 as? BatchSplitter.RequestTooLarge, BatchSplitter.RequestTooLarge(index: 1, size: 60))
        }
    }

    /// (That the writer gives `Codable`'s bytes for every field is TransferRequestCodingTests'.)
    func testThatARequestIsWrittenAsItsTreeWouldBe() throws {
        var list = TransferRequest(url: "http://example.com/a\"b\\c/\u{1}é")
        list.kind = "download"
        list.directory = "/tmp/x"
        list.headers = ["A: b", "C: d"]
        list.priority = -3
        list.insecure = true
        for request in [list, TransferRequest(url: "http://h/")] {
            XCTAssertEqual(
                String(decoding: BatchSplitter.encode(request), as: UTF8.self),
                String(decoding: try JobJSONWriter.json(request), as: UTF8.self))
        }
    }

    func testThatEveryPartOfARealListEncodesUnderTheLimitAndKeepsEveryRequestInOrder() throws {
        let requests = (0..<5000).map { index in
            var request = TransferRequest(
                url: "http://127.0.0.1:8080/files/\(index)/" + String(repeating: "p", count: 300))
            request.kind = "download"
            request.directory = "/tmp/downloads"
            return request
        }
        // As Submission sends them: each request written once, the parts' params from those bytes.
        let encoded = requests.map(BatchSplitter.encode)
        let overheads = try BatchSplitter.overheads()
        guard
            case .parts(let ranges) = try BatchSplitter().plan(
                sizes: encoded.map(\.count), singleOverhead: overheads.single, partOverhead: overheads.part)
        else { return XCTFail("5,000 requests of 300+ bytes do not fit in one line") }
        XCTAssertGreaterThan(ranges.count, 1)
        XCTAssertEqual(ranges.flatMap { Array($0) }, Array(0..<5000))
        var urls: [String] = []
        for (number, range) in ranges.enumerated() {
            let bytes = BatchSplitter.params(
                batch: BatchSplitter.newBatchID(), final: number == ranges.count - 1, requests: encoded[range])
            let params = try JSONParser.parse(bytes)
            let length = try BatchSplitter.lineLength(params: params)
            XCTAssertLessThanOrEqual(length, BatchSplitter.defaultMaximumLineLength, "part \(number)")
            guard case .array(let part)? = params["requests"] else { return XCTFail("part \(number): no requests") }
            for request in part {
                guard case .string(let url)? = request["url"] else { return XCTFail("a request without its url") }
                urls.append(url)
            }
        }
        XCTAssertEqual(urls, requests.map(\.url))
    }

    func testThatTheParamsHaveTheWireShapeOfTransferAddMany() {
        XCTAssertEqual(BatchSplitter.singleParams([.int(1)]), .object(["requests": .array([.int(1)])]))
        XCTAssertEqual(
            BatchSplitter.partParams(batch: "00ff", requests: [], final: true),
            .object(["batch": .string("00ff"), "requests": .array([]), "final": .bool(true)]))
    }

    func testThatABatchIdIsSixteenHexDigitsAndFresh() {
        let id = BatchSplitter.newBatchID()
        XCTAssertEqual(id.count, 16)
        XCTAssertTrue(id.allSatisfy(\.isHexDigit), id)
        XCTAssertNotEqual(id, BatchSplitter.newBatchID())
    }
}
