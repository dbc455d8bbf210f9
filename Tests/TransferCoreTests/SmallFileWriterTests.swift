import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

final class SmallFileWriterTests: TemporaryDirectoryTestCase {
    private func item(_ name: String, _ body: String, replace: Bool = false, in directory: String? = nil)
        -> SmallFileWriter.Item
    {
        let path = (directory ?? dir) + "/" + name
        return SmallFileWriter.Item(
            bytes: Array(body.utf8), part: Destination.partPath(path), path: path, mode: 0o640, replace: replace)
    }

    private func contents(_ path: String) throws -> String { try String(contentsOfFile: path, encoding: .utf8) }

    func testThatFilesFinishingWhileABatchRunsShareTheNextOne() throws {
        let loop = try EventLoop()
        let writer = SmallFileWriter(loop: loop)
        // A stale, longer part of another download: cut away, never spliced.
        try Data(repeating: 0xEE, count: 100).write(to: URL(fileURLWithPath: dir + "/f0.aftpart"))
        var outcomes: [Int: SmallFileWriter.Outcome] = [:]
        for n in 0..<150 {
            writer.write(item("f\(n)", "body \(n)")) { outcomes[n] = $0 }
        }
        loop.run()
        XCTAssertEqual(outcomes.count, 150)
        for n in 0..<150 {
            XCTAssertEqual(outcomes[n], .inPlace, "file \(n)")
            XCTAssertEqual(try contents(dir + "/f\(n)"), "body \(n)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/f\(n).aftpart"))
        }
        let mode = try FileManager.default.attributesOfItem(atPath: dir + "/f7")[.posixPermissions] as? Int
        XCTAssertEqual(mode, 0o640)
        // The first two alone (nothing was running), then the other 148 in batches of up to
        // `maximumBatch` (written without ``SmallFileWriter/gathering(_:)``).
        XCTAssertEqual(writer.batches, 2 + (148 + SmallFileWriter.maximumBatch - 1) / SmallFileWriter.maximumBatch)
    }

    func testThatFilesWrittenTogetherStartTogether() throws {
        let loop = try EventLoop()
        let writer = SmallFileWriter(loop: loop)
        var outcomes: [Int: SmallFileWriter.Outcome] = [:]
        let count = 3 * SmallFileWriter.maximumBatch + 1
        writer.gathering {
            for n in 0..<count {
                writer.write(item("g\(n)", "body \(n)")) { outcomes[n] = $0 }
            }
            XCTAssertEqual(writer.batches, 0, "nothing starts inside")
        }
        // As many full batches as lanes, at once.
        XCTAssertEqual(writer.batches, SmallFileWriter.maximumRunning)
        loop.run()
        XCTAssertEqual(outcomes.count, count)
        for n in 0..<count {
            XCTAssertEqual(outcomes[n], .inPlace, "file \(n)")
            XCTAssertEqual(try contents(dir + "/g\(n)"), "body \(n)")
        }
        // Full batches, then the one file left: none went alone before the others.
        XCTAssertEqual(writer.batches, 4)
    }

    func testThatEachFileOfABatchSucceedsOrFailsOnItsOwn() throws {
        let loop = try EventLoop()
        let writer = SmallFileWriter(loop: loop)
        _ = FileManager.default.createFile(atPath: dir + "/taken", contents: Data("old".utf8))
        _ = FileManager.default.createFile(atPath: dir + "/replaced", contents: Data("old".utf8))
        var outcomes: [String: SmallFileWriter.Outcome] = [:]
        let items = [
            ("first", item("first", "1")), ("fresh", item("fresh", "new")), ("taken", item("taken", "new")),
            ("replaced", item("replaced", "new", replace: true)), ("nowhere", item("f", "new", in: dir + "/missing")),
            ("empty", item("empty", "")),
        ]
        for (name, entry) in items { writer.write(entry) { outcomes[name] = $0 } }
        loop.run()

        XCTAssertEqual(outcomes["first"], .inPlace)
        XCTAssertEqual(outcomes["fresh"], .inPlace)
        XCTAssertEqual(try contents(dir + "/fresh"), "new")
        guard case .refused(let error)? = outcomes["taken"] else { return XCTFail("the existing file was replaced") }
        XCTAssertEqual(error.code, .destinationExists)
        XCTAssertEqual(try contents(dir + "/taken"), "old")
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/taken.aftpart"), "no part is written")
        XCTAssertEqual(outcomes["replaced"], .inPlace)
        XCTAssertEqual(try contents(dir + "/replaced"), "new")
        guard case .notWritten(let e)? = outcomes["nowhere"] else { return XCTFail("written without a directory") }
        XCTAssertEqual(e, ENOENT)
        XCTAssertEqual(FileErrors.error(e, "cannot write").code, .destinationMissingDir)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/missing"))
        XCTAssertEqual(outcomes["empty"], .inPlace)
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: dir + "/empty")[.size] as? Int, 0)
        XCTAssertEqual(writer.batches, 3)
    }

    func testThatAFileSystemSyncThatFailsFallsBackToAnFdatasyncAFile() throws {
        let loop = try EventLoop()
        final class Calls: @unchecked Sendable { var count = 0 }
        let calls = Calls()
        let writer = SmallFileWriter(loop: loop) { _ in
            calls.count += 1
            return EIO
        }
        var outcomes: [Int: SmallFileWriter.Outcome] = [:]
        for n in 0..<5 { writer.write(item("g\(n)", "g\(n)")) { outcomes[n] = $0 } }
        loop.run()
        // A file alone gets an fdatasync (the first two batches); the three of the third batch a
        // syncfs, which failed: then each its own fdatasync, which succeeded.
        XCTAssertEqual(calls.count, 1)
        for n in 0..<5 {
            XCTAssertEqual(outcomes[n], .inPlace)
            XCTAssertEqual(try contents(dir + "/g\(n)"), "g\(n)")
        }
    }

    /// On ext4 without a journal, a directory's fsync writes the directory, not the inodes of the
    /// files named in it: a file must have its one link (its part's name) when its data and inode
    /// are synced, so that putting it in place changes the directory alone (a rename). An unnamed
    /// file (`O_TMPFILE`) linked afterwards had link count 0 on disk until some later writeback.
    func testThatEveryFileHasItsLinkWhenItIsSynced() throws {
        let loop = try EventLoop()
        final class Seen: @unchecked Sendable { var links: [[Int]] = [] }
        let seen = Seen()
        let directory: String = dir
        let writer = SmallFileWriter(loop: loop) { _ in
            // Called with the batch's files written and open, before any is put in place.
            let links = (0..<3).map { n -> Int in
                var info = stat()
                return stat(directory + "/s\(n).aftpart", &info) == 0 ? Int(info.st_nlink) : 0
            }
            seen.links.append(links)
            return 0
        }
        var outcomes: [Int: SmallFileWriter.Outcome] = [:]
        // The first two go alone (fdatasync each); the other three share one batch and its syncfs.
        writer.write(item("first", "1")) { _ in }
        writer.write(item("second", "2")) { _ in }
        for n in 0..<3 { writer.write(item("s\(n)", "s\(n)")) { outcomes[n] = $0 } }
        loop.run()
        XCTAssertEqual(seen.links, [[1, 1, 1]])
        for n in 0..<3 {
            XCTAssertEqual(outcomes[n], .inPlace)
            XCTAssertEqual(try contents(dir + "/s\(n)"), "s\(n)")
        }
    }

    func testThatAnswersMayQueueMoreFiles() throws {
        let loop = try EventLoop()
        let writer = SmallFileWriter(loop: loop)
        var done: [Int] = []
        func chain(_ n: Int) {
            writer.write(item("c\(n)", "\(n)")) { outcome in
                XCTAssertEqual(outcome, .inPlace)
                done.append(n)
                if n < 5 { chain(n + 1) }
            }
        }
        chain(0)
        loop.run()
        XCTAssertEqual(done, [0, 1, 2, 3, 4, 5])
        XCTAssertEqual(writer.batches, 6)
    }
}
