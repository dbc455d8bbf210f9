import XCTest

@testable import TransferBase
@testable import TransferCore

final class MIMETypeTests: XCTestCase {
    func testThatCommonExtensionsAreKnown() {
        XCTAssertEqual(MIMEType.guess(forPath: "/a/b.txt"), "text/plain")
        XCTAssertEqual(MIMEType.guess(forPath: "/a/b.json"), "application/json")
        XCTAssertEqual(MIMEType.guess(forPath: "photo.jpg"), "image/jpeg")
        XCTAssertEqual(MIMEType.guess(forPath: "photo.jpeg"), "image/jpeg")
        XCTAssertEqual(MIMEType.guess(forPath: "x.png"), "image/png")
        XCTAssertEqual(MIMEType.guess(forPath: "x.pdf"), "application/pdf")
        XCTAssertEqual(MIMEType.guess(forPath: "x.mp4"), "video/mp4")
        XCTAssertEqual(MIMEType.guess(forPath: "x.svg"), "image/svg+xml")
        XCTAssertEqual(MIMEType.guess(forPath: "x.iso"), "application/x-iso9660-image")
        XCTAssertGreaterThanOrEqual(MIMEType.typesByExtension.count, 40)
    }

    func testThatTheExtensionIsCaseInsensitiveAndTheLastOneCounts() {
        XCTAssertEqual(MIMEType.guess(forPath: "/a/B.PNG"), "image/png")
        XCTAssertEqual(MIMEType.guess(forPath: "/a/archive.tar.gz"), "application/gzip")
    }

    func testThatUnknownOrMissingExtensionsAreOctetStream() {
        XCTAssertEqual(MIMEType.guess(forPath: "/a/b.unknownext"), "application/octet-stream")
        XCTAssertEqual(MIMEType.guess(forPath: "/a/README"), "application/octet-stream")
        XCTAssertEqual(MIMEType.guess(forPath: "/a/.bashrc"), "application/octet-stream")
        XCTAssertEqual(MIMEType.guess(forPath: "/a.d/file"), "application/octet-stream")
        XCTAssertEqual(MIMEType.guess(forPath: "/a/file."), "application/octet-stream")
        XCTAssertEqual(MIMEType.guess(forPath: ""), "application/octet-stream")
    }
}
