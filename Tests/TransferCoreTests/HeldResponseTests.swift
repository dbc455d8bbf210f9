import XCTest

@testable import TransferCore

/// What a held response keeps (``HeldResponse``): headers and body in order, up to its limit, and
/// a body handed over in pieces that a pause can split.
final class HeldResponseTests: XCTestCase {
    private func keep(_ r: inout HeldResponse, _ bytes: [UInt8], header: Bool) -> Bool {
        bytes.withUnsafeBytes { r.keep($0, header: header) }
    }

    func testThatHeadersAndBodyAreKeptInOrderAndHandedOverOnce() {
        var r = HeldResponse()
        XCTAssertTrue(keep(&r, Array("HTTP/1.1 200 OK\r\n".utf8), header: true))
        XCTAssertTrue(keep(&r, Array("Content-Length: 5\r\n".utf8), header: true))
        XCTAssertTrue(keep(&r, Array("\r\n".utf8), header: true))
        XCTAssertTrue(keep(&r, [1, 2, 3], header: false))
        XCTAssertTrue(keep(&r, [], header: false), "an empty body's call keeps nothing")
        XCTAssertTrue(keep(&r, [4, 5], header: false))
        XCTAssertEqual(
            r.takeHeaders().map { String(decoding: $0, as: UTF8.self) },
            ["HTTP/1.1 200 OK\r\n", "Content-Length: 5\r\n", "\r\n"])
        XCTAssertTrue(r.takeHeaders().isEmpty, "each header chunk is handed over once")
        XCTAssertEqual(Array(r.nextBody(most: 2)), [1, 2])
        r.bodyTaken(2)  // a callback took two bytes, then paused
        XCTAssertEqual(Array(r.nextBody(most: 16)), [3, 4, 5], "the rest, from where it stopped")
        r.bodyTaken(3)
        XCTAssertTrue(r.nextBody(most: 16).isEmpty)
    }

    func testThatNothingPastTheLimitIsKept() {
        var r = HeldResponse()
        XCTAssertTrue(keep(&r, [UInt8](repeating: 7, count: HeldResponse.limit - 10), header: false))
        XCTAssertFalse(keep(&r, [UInt8](repeating: 8, count: 11), header: false), "one byte too many: libcurl pauses")
        XCTAssertFalse(keep(&r, Array("X-Long: yes\r\n".utf8), header: true))
        XCTAssertTrue(keep(&r, [UInt8](repeating: 9, count: 10), header: false), "what still fits is kept")
        XCTAssertEqual(r.nextBody(most: .max).count, HeldResponse.limit)
        XCTAssertEqual(r.nextBody(most: .max).last, 9)
    }
}
