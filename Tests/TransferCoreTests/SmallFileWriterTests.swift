import Foundation
import XCTest

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

    func testThatFilesWrittenWhileAFlushRunsShareTheNextOne() throws {
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
        // The first part written is flushed alone (nothing was running); the parts written while a
        // flush runs share the next one, so far fewer flushes than files.
        XCTAssertGreaterThanOrEqual(writer.batches, 150 / SmallFileWriter.maximumBatch)
        XCTAssertLessThan(writer.batches, 75, "files written during a flush did not share the next one")
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
        guard case .notMoved(let error)? = outcomes["taken"] else { return XCTFail("the existing file was replaced") }
        XCTAssertEqual(error.code, .destinationExists)
        XCTAssertEqual(try contents(dir + "/taken"), "old")
        XCTAssertEqual(try contents(dir + "/taken.aftpart"), "new", "the synced part stays")
        XCTAssertEqual(outcomes["replaced"], .inPlace)
        XCTAssertEqual(try contents(dir + "/replaced"), "new")
        guard case .notWritten(let e)? = outcomes["nowhere"] else { return XCTFail("written without a directory") }
        XCTAssertEqual(e, ENOENT)
        XCTAssertEqual(FileErrors.error(e, "cannot write").code, .destinationMissingDir)
        XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/missing"))
        XCTAssertEqual(outcomes["empty"], .inPlace)
        XCTAssertEqual(try FileManager.default.attributesOfItem(atPath: dir + "/empty")[.size] as? Int, 0)
    }

    /// A written part as the first stage leaves it: created, written, open.
    private func written(_ entry: SmallFileWriter.Item) -> SmallFileWriter.Written {
        let fd = open(entry.part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, entry.mode)
        entry.bytes.withUnsafeBytes { _ = Glibc.write(fd, $0.baseAddress, $0.count) }
        return SmallFileWriter.Written(item: entry, fd: fd)
    }

    func testThatAFileSystemSyncThatFailsFallsBackToAnFdatasyncAFile() throws {
        var calls = 0
        let parts = (0..<3).map { written(item("g\($0)", "g\($0)")) }
        let (outcomes, unsynced) = SmallFileWriter.settle(parts) { _ in
            calls += 1
            return EIO
        }
        // The three share one syncfs, which failed: then each got its own fdatasync, which succeeded.
        XCTAssertEqual(calls, 1)
        XCTAssertEqual(outcomes, [.inPlace, .inPlace, .inPlace])
        XCTAssertEqual(unsynced, [])
        for n in 0..<3 {
            XCTAssertEqual(try contents(dir + "/g\(n)"), "g\(n)")
            XCTAssertFalse(FileManager.default.fileExists(atPath: dir + "/g\(n).aftpart"))
        }
    }

    func testThatAFileAloneOnItsFileSystemIsSyncedOnItsOwn() throws {
        var calls = 0
        let (outcomes, _) = SmallFileWriter.settle([written(item("alone", "a"))]) { _ in
            calls += 1
            return 0
        }
        XCTAssertEqual(calls, 0, "one file: an fdatasync, not a syncfs of the whole file system")
        XCTAssertEqual(outcomes, [.inPlace])
        XCTAssertEqual(try contents(dir + "/alone"), "a")
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
