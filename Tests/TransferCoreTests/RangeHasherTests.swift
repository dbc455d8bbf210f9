import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

final class RangeHasherTests: TemporaryDirectoryTestCase {
    /// Writes `data` to a file in chunks as a download does, telling the hasher each one, and
    /// returns the digest it finishes with.
    private func digest(of data: [UInt8], chunk: Int, resumeFrom prefix: Int = 0) throws -> String? {
        let loop = try EventLoop()
        let path = dir + "/f-\(UUID().uuidString)"
        // A resumed part: the prefix is already on disk, and only read back.
        FileManager.default.createFile(atPath: path, contents: Data(data.prefix(prefix)))
        let fd = open(path, O_WRONLY)
        defer { close(fd) }
        let hasher = RangeHasher(loop: loop, path: path)
        var result: String?
        hasher.whenHashed(upTo: Int64(prefix)) { ok in
            XCTAssertTrue(ok)
            var at = prefix
            while at < data.count {
                let end = min(at + chunk, data.count)
                data[at..<end].withUnsafeBytes { buf in
                    _ = pwrite(fd, buf.baseAddress!, buf.count, off_t(at))
                    hasher.wrote(buf, at: Int64(at))
                }
                at = end
            }
            hasher.finish(at: Int64(data.count)) { result = $0 }
        }
        loop.run()
        return result
    }

    func testThatBytesHashedAsTheyArriveAndReadBackGiveTheFileDigest() throws {
        // Across the inline limit: the first MiB from memory, the rest read back on the pool.
        var data = [UInt8](repeating: 0, count: Int(RangeHasher.inlineBytes) + 300_000)
        for i in data.indices { data[i] = UInt8(truncatingIfNeeded: i &* 31 &+ 7) }
        let want = Sha256.hex(of: data)
        XCTAssertEqual(try digest(of: data, chunk: 16_384), want)
        XCTAssertEqual(try digest(of: data, chunk: 100_000), want, "chunks that straddle the limit")
        XCTAssertEqual(
            try digest(of: Array(data.prefix(16_384)), chunk: 4_096), Sha256.hex(of: Array(data.prefix(16_384))))
    }

    func testThatAResumedPartHashesItsPrefixFromDiskThenTheNewBytes() throws {
        var data = [UInt8](repeating: 0, count: 200_000)
        for i in data.indices { data[i] = UInt8(truncatingIfNeeded: i &* 13) }
        XCTAssertEqual(try digest(of: data, chunk: 16_384, resumeFrom: 50_000), Sha256.hex(of: data))
    }

    func testThatAnEmptyFileHasTheEmptyDigest() throws {
        XCTAssertEqual(try digest(of: [], chunk: 1), Sha256.hex(of: []))
    }
}
