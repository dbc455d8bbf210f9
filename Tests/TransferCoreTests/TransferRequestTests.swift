import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

final class TransferRequestTests: XCTestCase {
    /// A request with every field set.
    private func full() -> TransferRequest {
        var r = TransferRequest(url: "https://example.com/f")
        r.kind = "upload"
        r.method = "POST"
        r.destination = "/d/f"
        r.directory = "/d"
        r.createDirs = true
        r.replace = false
        r.headers = ["X-A: 1"]
        r.user = "u:p"
        r.sha256 = String(repeating: "a", count: 64)
        r.priority = -2
        r.limitRate = "2M"
        r.retries = 3
        r.source = "/s"
        r.form = ["a=b"]
        r.response = "/r"
        r.cacert = "/c.pem"
        r.pinPubkey = "sha256//x"
        r.pinCert = "/p.pem"
        r.insecure = true
        r.resumable = "tus"
        r.onEnd = "true"
        r.connections = 4
        return r
    }

    func testThatEveryFieldSurvivesTheWireBothWays() throws {
        let r = full()
        for child in Mirror(reflecting: r).children {
            if case Optional<Any>.none = child.value as Any? { continue }
            let mirror = Mirror(reflecting: child.value)
            XCTAssertFalse(
                mirror.displayStyle == .optional && mirror.children.isEmpty,
                "\(child.label ?? "?") is not set here: set it, and decode it in TransferRequest.init(from:)")
        }
        XCTAssertEqual(try JSONValue(encoding: r).decode(as: TransferRequest.self), r)
        XCTAssertEqual(try JSONDecoder().decode(TransferRequest.self, from: JSONEncoder().encode(r)), r)
    }

    func testThatLimitRateMayBeANumberOfBytes() throws {
        let bytes = try JSONValue.object(["url": .string("http://h/x"), "limitRate": .int(1000)])
            .decode(as: TransferRequest.self)
        XCTAssertEqual(bytes.limitRate, "1000")
        let text = try JSONValue.object(["url": .string("http://h/x"), "limitRate": .string("2M")])
            .decode(as: TransferRequest.self)
        XCTAssertEqual(text.limitRate, "2M")
        XCTAssertThrowsError(
            try JSONValue.object(["url": .string("http://h/x"), "limitRate": .bool(true)])
                .decode(as: TransferRequest.self))
    }
}
