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
        // The first two alone (nothing was running), then the other 148 in batches of at most 16.
        XCTAssertEqual(writer.batches, 2 + (148 + SmallFileWriter.maximumBatch - 1) / SmallFileWriter.maximumBatch)
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
    func testThatAFileIsWrittenUnnamedAndNeverAsAPart() throws {
        let loop = try EventLoop()
        let writer = SmallFileWriter(loop: loop)
        // Its part could not even be created: only an unnamed file in the destination's
        // directory, linked to its name, puts it in place.
        let path = dir + "/unnamed"
        let entry = SmallFileWriter.Item(
            bytes: Array("whole".utf8), part: dir + "/no/such/dir/unnamed.aftpart", path: path, mode: 0o600,
            replace: false)
        var outcome: SmallFileWriter.Outcome?
        writer.write(entry) { outcome = $0 }
        loop.run()
        XCTAssertEqual(outcome, .inPlace)
        XCTAssertEqual(try contents(path), "whole")
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: dir), ["unnamed"])
    }

    func testThatADestinationTakenAfterTheLookKeepsTheSyncedBytesAsThePart() throws {
        let loop = try EventLoop()
        let taken = dir + "/h3"
        // Runs between the writes and the links: someone else takes h3 meanwhile.
        let writer = SmallFileWriter(loop: loop) { _ in
            _ = FileManager.default.createFile(atPath: taken, contents: Data("theirs".utf8))
            return 0
        }
        var outcomes: [Int: SmallFileWriter.Outcome] = [:]
        for n in 0..<5 { writer.write(item("h\(n)", "mine \(n)")) { outcomes[n] = $0 } }
        loop.run()
        guard case .notMoved(let error)? = outcomes[3] else {
            return XCTFail("h3: \(String(describing: outcomes[3]))")
        }
        XCTAssertEqual(error.code, .destinationExists)
        XCTAssertEqual(try contents(taken), "theirs")
        XCTAssertEqual(try contents(taken + ".aftpart"), "mine 3", "the job's bytes are kept as its part")
        for n in [0, 1, 2, 4] {
            XCTAssertEqual(outcomes[n], .inPlace)
            XCTAssertEqual(try contents(dir + "/h\(n)"), "mine \(n)")
        }
    }
}
