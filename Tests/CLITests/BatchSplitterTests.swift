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

    func testThatARequestIsWrittenAsItsTreeWouldBe() throws {
        var full = TransferRequest(url: "http://example.com/a\"b\\c/\u{1}é")
        full.kind = "download"
        full.method = "GET"
        full.destination = "/tmp/x"
        full.createDirs = true
        full.replace = false
        full.headers = ["A: b", "C: d"]
        full.user = "u:p"
        full.sha256 = String(repeating: "a", count: 64)
        full.priority = -3
        full.limitRate = "2M"
        full.retries = 0
        full.cacert = "/ca.pem"
        full.pinPubkey = "sha256//x"
        full.pinCert = "/c.pem"
        full.insecure = true
        full.onEnd = "echo done"
        full.connections = 4
        var upload = TransferRequest(url: "https://example.com/up")
        upload.kind = "upload"
        upload.source = "/src"
        upload.form = ["a=b", "f=@/x"]
        upload.response = "/resp"
        upload.resumable = "tus"
        for request in [full, upload, TransferRequest(url: "http://h/")] {
            XCTAssertEqual(
                String(decoding: BatchSplitter.encode(request), as: UTF8.self),
                String(decoding: BatchSplitter.encode(try JSONValue(encoding: request)), as: UTF8.self))
        }
    }

    func testThatEveryPartOfARealListEncodesUnderTheLimitAndKeepsEveryRequestInOrder() throws {
        let requests: [JSONValue] = try (0..<5000).map { index in
            var request = TransferRequest(
                url: "http://127.0.0.1:8080/files/\(index)/" + String(repeating: "p", count: 300))
            request.kind = "download"
            request.directory = "/tmp/downloads"
            return try JSONValue(encoding: request)
        }
        let overheads = try BatchSplitter.overheads()
        let sizes = try requests.map { try BatchSplitter.size(of: $0) }
        guard
            case .parts(let ranges) = try BatchSplitter().plan(
                sizes: sizes, singleOverhead: overheads.single, partOverhead: overheads.part)
        else { return XCTFail("5,000 requests of 300+ bytes do not fit in one line") }
        XCTAssertGreaterThan(ranges.count, 1)
        XCTAssertEqual(ranges.flatMap { Array($0) }, Array(0..<5000))
        for (number, range) in ranges.enumerated() {
            let params = BatchSplitter.partParams(
                batch: BatchSplitter.newBatchID(), requests: Array(requests[range]), final: number == ranges.count - 1)
            let length = try BatchSplitter.lineLength(params: params)
            XCTAssertLessThanOrEqual(length, BatchSplitter.defaultMaximumLineLength, "part \(number)")
        }
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
