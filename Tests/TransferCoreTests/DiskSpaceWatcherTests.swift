import XCTest

@testable import TransferBase
@testable import TransferCore

/// ``DiskSpaceWatcher`` and ``DiskSpace``: which waiting jobs start when space is free.
final class DiskSpaceWatcherTests: XCTestCase {
    private func watcher(
        loop: EventLoop, free: @escaping (String) -> Int64?, waiting: Set<Int64> = [1, 2, 3],
        started: @escaping (Int64) -> Void
    ) -> DiskSpaceWatcher {
        let w = DiskSpaceWatcher(loop: loop, stillWaiting: { waiting.contains($0) }, onFree: started)
        w.freeSpace = free
        return w
    }

    func testThatAJobStartsOnlyWhenWhatItStillNeedsIsFree() throws {
        let loop = try EventLoop()
        var free: Int64 = 4 << 20
        var started: [Int64] = []
        let w = watcher(loop: loop, free: { _ in free }) { started.append($0) }
        w.watch(1, .init(path: "/mnt", bytes: 5 << 20, sizeKnown: true))
        w.check()
        XCTAssertEqual(started, [])
        XCTAssertEqual(w.watched, [1])
        free = 5 << 20
        w.check()
        XCTAssertEqual(started, [1])
        XCTAssertEqual(w.watched, [])
        w.close()
    }

    func testThatAnUnknownSizeWaitsForMoreThanOneMebibyte() throws {
        let loop = try EventLoop()
        var free: Int64 = DiskSpaceWatcher.unknownSizeNeed
        var started: [Int64] = []
        let w = watcher(loop: loop, free: { _ in free }) { started.append($0) }
        w.watch(2, .init(path: "/mnt", bytes: DiskSpaceWatcher.unknownSizeNeed, sizeKnown: false))
        w.check()
        XCTAssertEqual(started, [], "exactly 1 MiB is not more than 1 MiB")
        free += 1
        w.check()
        XCTAssertEqual(started, [2])
        w.close()
    }

    func testThatJobsOnOneFileSystemShareItsSpaceInIdOrder() throws {
        let loop = try EventLoop()
        var started: [Int64] = []
        let w = watcher(loop: loop, free: { $0 == "/a" ? 6 << 20 : 1 << 30 }) { started.append($0) }
        w.watch(3, .init(path: "/a", bytes: 4 << 20, sizeKnown: true))
        w.watch(1, .init(path: "/a", bytes: 4 << 20, sizeKnown: true))
        w.watch(2, .init(path: "/b", bytes: 4 << 20, sizeKnown: true))
        w.check()
        XCTAssertEqual(started, [1, 2], "job 3 waits: job 1 takes 4 of the 6 MiB free")
        XCTAssertEqual(w.watched, [3])
        w.close()
    }

    func testThatAJobNoLongerWaitingIsForgotten() throws {
        let loop = try EventLoop()
        var started: [Int64] = []
        let w = watcher(loop: loop, free: { _ in 1 << 30 }, waiting: [1]) { started.append($0) }
        w.watch(1, .init(path: "/a", bytes: 1, sizeKnown: true))
        w.watch(9, .init(path: "/a", bytes: 1, sizeKnown: true))
        w.check()
        XCTAssertEqual(started, [1], "job 9 was paused or cancelled meanwhile")
        XCTAssertEqual(w.watched, [])
        w.close()
    }

    func testThatTheFreeSpaceOfAPathNotCreatedYetIsItsFileSystems() throws {
        let dir = NSTemporaryDirectory()
        let direct = try XCTUnwrap(DiskSpace.available(at: dir))
        let missing = try XCTUnwrap(DiskSpace.available(at: dir + "/no/such/dir/file.aftpart"))
        XCTAssertGreaterThan(direct, 0)
        // The same file system, asked a moment apart: within 64 MiB of each other.
        XCTAssertLessThan(abs(direct - missing), 64 << 20)
        XCTAssertEqual(DiskSpace.describe(3 << 20), "3.0 MiB")
        XCTAssertEqual(DiskSpace.describe(512), "512 bytes")
        // As the CLI rounds: never "1024.0 GiB" (it said so for a file one byte short of 1 TiB).
        XCTAssertEqual(DiskSpace.describe((1 << 40) - 1), "1.0 TiB")
        XCTAssertEqual(DiskSpace.describe(1 << 50), "1.0 PiB")
    }

    func testThatAJobHeldBackIsNotStartedBeforeItsTime() throws {
        let loop = try EventLoop()
        var clock = 100.0
        var started: [Int64] = []
        let w = watcher(loop: loop, free: { _ in 1 << 30 }) { started.append($0) }
        w.now = { clock }
        w.watch(1, .init(path: "/a", bytes: 1, sizeKnown: true, notBefore: 104))
        w.check()
        XCTAssertEqual(started, [], "ran out of space again without progress: held back")
        clock = 104
        w.check()
        XCTAssertEqual(started, [1])
        w.close()
    }
}
