import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

final class MultipartFormDataTests: XCTestCase {
    private var directory = ""

    override func setUpWithError() throws {
        directory = NSTemporaryDirectory() + "aft-multipart-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: directory)
    }

    private func makeFile(_ name: String, _ contents: String) throws -> String {
        let path = directory + "/" + name
        try Data(contents.utf8).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// Reads a stream to its end through a buffer of `chunk` bytes.
    private func drain(_ stream: UploadBodyStream, chunk: Int) throws -> Data {
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 1)
        defer { buffer.deallocate() }
        var out = Data()
        while true {
            let n = try stream.read(into: buffer, count: chunk)
            if n == 0 { return out }
            out.append(buffer.assumingMemoryBound(to: UInt8.self), count: n)
        }
    }

    private func twoFieldsAndTwoFiles() throws -> (MultipartFormData, a: String, b: String) {
        let a = try makeFile("a.txt", "alpha\n")
        let b = try makeFile("b.bin", "\u{0}\u{1}beta")
        let form = MultipartFormData(boundary: "BOUNDARY")
        form.append(.field(name: "title", value: "Hello"), fileLength: 0)
        form.append(.file(name: "doc", path: a, contentType: nil, filename: nil), fileLength: 6)
        form.append(.field(name: "note", value: "two\r\nlines"))
        form.append(
            .file(name: "blob", path: b, contentType: "application/x-test", filename: "renamed.dat"),
            fileLength: 6)
        return (form, a, b)
    }

    func testThatTwoFieldsAndTwoFilesEncodeToTheHandBuiltBody() throws {
        let (form, _, _) = try twoFieldsAndTwoFiles()
        let expected =
            "--BOUNDARY\r\n"
            + "Content-Disposition: form-data; name=\"title\"\r\n"
            + "\r\n"
            + "Hello\r\n"
            + "--BOUNDARY\r\n"
            + "Content-Disposition: form-data; name=\"doc\"; filename=\"a.txt\"\r\n"
            + "Content-Type: text/plain\r\n"
            + "\r\n"
            + "alpha\n\r\n"
            + "--BOUNDARY\r\n"
            + "Content-Disposition: form-data; name=\"note\"\r\n"
            + "\r\n"
            + "two\r\nlines\r\n"
            + "--BOUNDARY\r\n"
            + "Content-Disposition: form-data; name=\"blob\"; filename=\"renamed.dat\"\r\n"
            + "Content-Type: application/x-test\r\n"
            + "\r\n"
            + "\u{0}\u{1}beta\r\n"
            + "--BOUNDARY--\r\n"
        XCTAssertEqual(String(decoding: try form.encode(), as: UTF8.self), expected)
        XCTAssertEqual(form.contentType, "multipart/form-data; boundary=BOUNDARY")
    }

    func testThatTheContentLengthEqualsTheBytesProduced() throws {
        let (form, _, _) = try twoFieldsAndTwoFiles()
        let encoded = try form.encode()
        XCTAssertEqual(form.contentLength, Int64(encoded.count))
        for chunk in [1, 7, 64, 1 << 16] {
            let stream = UploadBodyStream(segments: form.segments)
            XCTAssertEqual(stream.length, form.contentLength)
            XCTAssertEqual(try drain(stream, chunk: chunk), encoded, "buffer of \(chunk) bytes")
            XCTAssertEqual(stream.position, form.contentLength)
        }
    }

    func testThatFilesAreSeparateSegmentsAndInlineBytesAreMerged() throws {
        let (form, a, b) = try twoFieldsAndTwoFiles()
        let segments = form.segments
        XCTAssertEqual(segments.count, 5)
        XCTAssertEqual(segments[1], .file(path: a, length: 6))
        XCTAssertEqual(segments[3], .file(path: b, length: 6))
    }

    func testThatAStreamRewindsToByteZero() throws {
        let (form, _, _) = try twoFieldsAndTwoFiles()
        let stream = UploadBodyStream(segments: form.segments)
        let buffer = UnsafeMutableRawPointer.allocate(byteCount: 100, alignment: 1)
        defer { buffer.deallocate() }
        _ = try stream.read(into: buffer, count: 100)
        stream.rewind()
        XCTAssertEqual(stream.position, 0)
        XCTAssertEqual(try drain(stream, chunk: 13), try form.encode())
    }

    func testThatQuotesAndLineBreaksInNamesAndFilenamesAreEscaped() throws {
        let form = MultipartFormData(boundary: "B")
        form.append(
            Data("v".utf8), withName: "a\"b\r\nc", fileName: "x\"y\r\n.txt", mimeType: "text/plain")
        let text = String(decoding: try form.encode(), as: UTF8.self)
        XCTAssertTrue(
            text.contains(
                "Content-Disposition: form-data; name=\"a%22b%0D%0Ac\"; filename=\"x%22y%0D%0A.txt\"\r\n"),
            text)
        XCTAssertEqual(MultipartFormData.escapedQuotedString("plain ü; \\ name"), "plain ü; \\ name")
    }

    func testThatAFileTypeIsGuessedFromTheFilenameThenThePath() {
        XCTAssertEqual(
            MultipartFormData.mimeType(forFileName: "pic.png", path: "/tmp/upload.tmp"), "image/png")
        XCTAssertEqual(
            MultipartFormData.mimeType(forFileName: "upload", path: "/tmp/report.pdf"), "application/pdf")
        XCTAssertEqual(
            MultipartFormData.mimeType(forFileName: "a", path: "/tmp/b"), "application/octet-stream")
    }

    func testThatAFieldHasNoContentTypeAndAFileWithoutFilenameUsesItsLastPathComponent() throws {
        let path = try makeFile("data.json", "{}")
        let form = MultipartFormData(boundary: "B")
        form.append(.field(name: "f", value: "1"))
        form.append(.file(name: "j", path: path, contentType: nil, filename: nil), fileLength: 2)
        let text = String(decoding: try form.encode(), as: UTF8.self)
        XCTAssertEqual(
            text,
            "--B\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\n1\r\n"
                + "--B\r\nContent-Disposition: form-data; name=\"j\"; filename=\"data.json\"\r\n"
                + "Content-Type: application/json\r\n\r\n{}\r\n--B--\r\n")
    }

    func testThatAnEmptyFormIsOnlyTheFinalBoundary() throws {
        let form = MultipartFormData(boundary: "B")
        XCTAssertEqual(String(decoding: try form.encode(), as: UTF8.self), "--B--\r\n")
        XCTAssertEqual(form.contentLength, 7)
    }

    func testThatRandomBoundariesDifferAndHaveAFixedLength() {
        let a = MultipartFormData.randomBoundary()
        let b = MultipartFormData.randomBoundary()
        XCTAssertNotEqual(a, b)
        XCTAssertTrue(a.hasPrefix(MultipartFormData.boundaryPrefix))
        XCTAssertEqual(a.count, MultipartFormData.boundaryPrefix.count + 16)
        XCTAssertEqual(b.count, a.count)
    }

    func testThatAFileThatShrankIsASourceChange() throws {
        let path = try makeFile("s.txt", "short")
        let stream = UploadBodyStream(segments: [.file(path: path, length: 10)])
        XCTAssertThrowsError(try drain(stream, chunk: 4)) { error in
            XCTAssertEqual((error as? TransferError)?.code, .sourceChanged)
        }
    }

    func testThatAFileWithAnotherMtimeIsASourceChange() throws {
        let path = try makeFile("m.txt", "hello")
        let stream = UploadBodyStream(
            segments: [.file(path: path, length: 5)], modificationTimes: [path: 12345])
        XCTAssertThrowsError(try drain(stream, chunk: 4)) { error in
            XCTAssertEqual((error as? TransferError)?.code, .sourceChanged)
        }
    }

    func testThatAMissingFileIsASourceChange() {
        let stream = UploadBodyStream(segments: [.file(path: directory + "/gone", length: 1)])
        XCTAssertThrowsError(try drain(stream, chunk: 4)) { error in
            XCTAssertEqual((error as? TransferError)?.code, .sourceChanged)
        }
    }
}
