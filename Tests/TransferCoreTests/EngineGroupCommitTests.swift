import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

/// The engine's end-of-pass commit and what waits for it.
final class EngineGroupCommitTests: TemporaryDirectoryTestCase {
    /// Small files that waited for one commit (their finalizing rows) go to the pool as one batch,
    /// not the first alone on a free lane and the rest behind it.
    func testThatTheSmallFilesOneCommitLetsGoStartAsOneBatch() throws {
        let loop = try EventLoop()
        let store = try JobStore(path: dir + "/t.sqlite")
        let engine = try Engine(loop: loop, store: store, config: EngineConfig())
        try engine.recover()
        let count = SmallFileWriter.maximumBatch
        var outcomes: [Int: SmallFileWriter.Outcome] = [:]
        for n in 0..<count {
            engine.afterCommit {
                let path = self.dir + "/s\(n)"
                let item = SmallFileWriter.Item(
                    bytes: Array("small \(n)".utf8), part: Destination.partPath(path), path: path, mode: 0o600,
                    replace: false)
                engine.smallFileWriter.write(item) { outcomes[n] = $0 }
            }
        }
        try engine.commit()
        XCTAssertEqual(engine.smallFileWriter.batches, 1, "one batch for the files of one commit")
        loop.run()
        for n in 0..<count {
            XCTAssertEqual(outcomes[n], .inPlace, "file \(n)")
            XCTAssertEqual(try String(contentsOfFile: dir + "/s\(n)", encoding: .utf8), "small \(n)")
        }
        XCTAssertEqual(engine.smallFileWriter.batches, 1)
    }
}
