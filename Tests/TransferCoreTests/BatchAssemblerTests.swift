import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

final class BatchAssemblerTests: XCTestCase {
    private var now = 1000.0
    /// What the store holds for each batch (the staging table), by key.
    private var held: [String: [String]] = [:]
    private var discarded: [String] = []
    private lazy var assembler = BatchAssembler(
        clock: { [unowned self] in self.now },
        discard: { [unowned self] key in
            self.held[key.storeKey] = nil
            self.discarded.append(key.storeKey)
        })

    private func download(_ name: String, directory: Bool = false) -> TransferRequest {
        var r = TransferRequest(url: "http://h/\(name)")
        if directory {
            r.directory = "/tmp/aft-batch"
        } else {
            r.destination = "/tmp/aft-batch/\(name)"
        }
        return r
    }

    /// A row for `r`, as the engine's `prepare` makes one (a directory becomes a destination).
    private func record(_ r: TransferRequest) -> JobRecord {
        let destination = r.destination ?? r.directory.map { $0 + "/" + (r.url.split(separator: "/").last ?? "") }
        return JobRecord(
            id: nil, kind: .download, url: r.url, method: "GET", state: .queued, request: r, destination: destination,
            durableBytes: 0, total: nil, etag: nil, lastModified: nil, attempts: 0, retriesUsed: 0, httpStatus: nil,
            error: nil, waitReason: nil, nextRetryAt: nil, priority: 0, finalizing: false, sha256: nil,
            sourceSize: nil, sourceMtime: nil, response: nil, createdAt: now, updatedAt: now, completedAt: nil)
    }

    private func receive(
        _ batch: String, _ requests: [TransferRequest], final: Bool, owner: Int = 1,
        prepare: ((TransferRequest) throws -> JobRecord)? = nil
    ) throws -> BatchAssembler.Outcome {
        try assembler.receive(
            owner: owner, batch: batch, decoded: requests.map { .success($0) }, final: final,
            prepare: prepare ?? record,
            stage: { records, key in self.held[key.storeKey, default: []] += records.map(\.url) })
    }

    private func complete(_ outcome: BatchAssembler.Outcome) -> BatchAssembler.Complete? {
        if case .complete(let c) = outcome { return c }
        XCTFail("not complete: \(outcome)")
        return nil
    }

    func testThatEachPartIsPreparedAndHandedToTheStoreAndTheFinalPartCompletesTheBatch() throws {
        XCTAssertEqual(try receive("b", [download("a"), download("b")], final: false), .partial(received: 2))
        XCTAssertEqual(try receive("b", [download("c")], final: false), .partial(received: 3))
        XCTAssertEqual(assembler.count, 1)
        let done = complete(try receive("b", [download("d")], final: true))
        XCTAssertEqual(done?.count, 4)
        XCTAssertEqual(done?.key.storeKey, "1:b")
        XCTAssertEqual(done?.destinations["/tmp/aft-batch/c"], BatchAssembler.Claim(index: 2, replace: false))
        XCTAssertEqual(held["1:b"], ["http://h/a", "http://h/b", "http://h/c", "http://h/d"])
        XCTAssertEqual(assembler.count, 0)
    }

    func testThatEachRequestIsPreparedOnceAsItsPartArrives() throws {
        var prepared = 0
        let counting: (TransferRequest) throws -> JobRecord = { r in
            prepared += 1
            return self.record(r)
        }
        _ = try receive("v", [download("a")], final: false, prepare: counting)
        _ = try receive("v", [download("b")], final: true, prepare: counting)
        XCTAssertEqual(prepared, 2)
    }

    func testThatARefusedRequestIsNamedByItsIndexInTheBatchAndDropsTheBatchAndItsRows() throws {
        _ = try receive("b", [download("a"), download("b")], final: false)
        XCTAssertThrowsError(
            try receive("b", [download("c"), download("bad")], final: false) { r in
                if r.url.hasSuffix("bad") { throw TransferError(.invalidRequest, "url: bad") }
                return self.record(r)
            }
        ) { error in
            XCTAssertEqual(
                error as? BatchRefusal, BatchRefusal(index: 3, error: TransferError(.invalidRequest, "url: bad")))
        }
        XCTAssertEqual(assembler.count, 0)
        XCTAssertEqual(discarded, ["1:b"])
        XCTAssertNil(held["1:b"], "the rows held for the dropped batch are forgotten")
        // A later part of the dropped batch is refused, never queued as a new batch.
        XCTAssertThrowsError(try receive("b", [download("e")], final: true)) {
            XCTAssertEqual(($0 as? RPCError)?.code, RPCErrorCode.invalidParams)
        }
        XCTAssertNil(held["1:b"])
    }

    func testThatAStoreThatCannotHoldAPartDropsTheBatch() throws {
        XCTAssertThrowsError(
            try assembler.receive(
                owner: 1, batch: "full", decoded: [.success(download("a"))], final: false, prepare: record,
                stage: { _, _ in throw TransferError(.diskFull, "disk full") }))
        XCTAssertEqual(discarded, ["1:full"])
        XCTAssertEqual(assembler.count, 0)
    }

    func testThatTwoRequestsOfABatchWithOneDestinationAreRefused() throws {
        _ = try receive("b", [download("a")], final: false)
        XCTAssertThrowsError(try receive("b", [download("b"), download("a")], final: true)) { error in
            XCTAssertEqual((error as? BatchRefusal)?.index, 2)
            XCTAssertEqual((error as? BatchRefusal)?.error.code, .destinationExists)
        }
        XCTAssertThrowsError(
            try BatchAssembler.checkDistinctDestinations([download("x"), download("y"), download("x")])
        ) {
            XCTAssertEqual(($0 as? BatchRefusal)?.index, 2)
        }
    }

    func testThatTwoRequestsWhoseDirectoryAndURLGiveOneDestinationAreRefused() throws {
        _ = try receive("d", [download("same", directory: true)], final: false)
        XCTAssertThrowsError(try receive("d", [download("same", directory: true)], final: true)) { error in
            XCTAssertEqual((error as? BatchRefusal)?.index, 1)
            XCTAssertEqual((error as? BatchRefusal)?.error.code, .destinationExists)
        }
    }

    func testThatABatchWithoutAPartFor60SecondsIsDropped() throws {
        _ = try receive("old", [download("a")], final: false)
        now += 30
        _ = try receive("young", [download("b")], final: false)
        now += 29
        _ = try receive("old", [download("c")], final: false)
        now += 31
        XCTAssertEqual(assembler.expire().map(\.batch), ["young"])
        XCTAssertEqual(discarded, ["1:young"])
        XCTAssertEqual(assembler.count, 1)
        now += 28
        XCTAssertEqual(assembler.expire(), [])
        now += 1
        XCTAssertEqual(assembler.expire().map(\.batch), ["old"])
        XCTAssertThrowsError(try receive("old", [], final: true))
    }

    func testThatAClosedConnectionDropsItsBatchesOnlyAndBatchesAreSeparatePerConnection() throws {
        _ = try receive("b", [download("a")], final: false, owner: 1)
        _ = try receive("b", [download("a")], final: false, owner: 2)
        assembler.drop(owner: 1)
        XCTAssertEqual(discarded, ["1:b"])
        XCTAssertEqual(assembler.count, 1)
        XCTAssertEqual(complete(try receive("b", [], final: true, owner: 2))?.count, 1)
        XCTAssertEqual(held["2:b"], ["http://h/a"])
        // The number of a closed connection is never reused, but a dropped batch is forgotten with it.
        XCTAssertEqual(complete(try receive("b", [download("z")], final: true, owner: 1))?.count, 1)
    }

    /// A line of the connection that was lost may have been a part: its open batches are dropped,
    /// their later parts refused; another connection's batch goes on.
    func testThatALostLineDropsTheConnectionsOpenBatchesAndRefusesTheirLaterParts() throws {
        _ = try receive("b", [download("a")], final: false, owner: 1)
        _ = try receive("c", [download("c")], final: false, owner: 2)
        XCTAssertEqual(assembler.dropOpen(owner: 1).map(\.batch), ["b"])
        XCTAssertEqual(discarded, ["1:b"])
        XCTAssertThrowsError(try receive("b", [download("d")], final: true, owner: 1)) { error in
            XCTAssertTrue("\(error)".contains("was dropped"), "\(error)")
        }
        XCTAssertEqual(complete(try receive("c", [], final: true, owner: 2))?.count, 1)
    }
}
