import Foundation
import XCTest

@testable import TransferCore

final class BatchAssemblerTests: XCTestCase {
    private var now = 1000.0
    private lazy var assembler = BatchAssembler(clock: { [unowned self] in self.now })

    private func download(_ name: String) -> TransferRequest {
        var r = TransferRequest(url: "http://h/\(name)")
        r.destination = "/tmp/aft-batch/\(name)"
        return r
    }

    private func accept(_ r: TransferRequest) throws -> TransferRequest { r }

    func testThatPartsAreHeldUntilTheFinalPartThenReturnedInOrder() throws {
        XCTAssertEqual(
            try assembler.receive(
                owner: 1, batch: "b", requests: [download("a"), download("b")], final: false, check: accept),
            .partial(received: 2))
        XCTAssertEqual(
            try assembler.receive(owner: 1, batch: "b", requests: [download("c")], final: false, check: accept),
            .partial(received: 3))
        XCTAssertEqual(assembler.count, 1)
        XCTAssertEqual(
            try assembler.receive(owner: 1, batch: "b", requests: [download("d")], final: true, check: accept),
            .complete([download("a"), download("b"), download("c"), download("d")]))
        XCTAssertEqual(assembler.count, 0)
    }

    func testThatTheBatchHoldsTheRequestsAsValidatedSoTheFinalPartNeedNotValidateAgain() throws {
        var checked = 0
        let normalize: (TransferRequest) throws -> TransferRequest = { r in
            checked += 1
            var v = r
            v.kind = "download"
            return v
        }
        _ = try assembler.receive(owner: 1, batch: "v", requests: [download("a")], final: false, check: normalize)
        let outcome = try assembler.receive(
            owner: 1, batch: "v", requests: [download("b")], final: true, check: normalize)
        guard case .complete(let all) = outcome else { return XCTFail("not complete: \(outcome)") }
        XCTAssertEqual(all.map(\.kind), ["download", "download"])
        XCTAssertEqual(checked, 2, "each request is checked once, as its part arrives")
    }

    func testThatARefusedRequestIsNamedByItsIndexInTheBatchAndDropsTheBatch() throws {
        _ = try assembler.receive(
            owner: 1, batch: "b", requests: [download("a"), download("b")], final: false, check: accept)
        XCTAssertThrowsError(
            try assembler.receive(owner: 1, batch: "b", requests: [download("c"), download("bad")], final: false) { r in
                if r.url.hasSuffix("bad") { throw TransferError(.invalidRequest, "url: bad") }
                return r
            }
        ) { error in
            XCTAssertEqual(
                error as? BatchRefusal, BatchRefusal(index: 3, error: TransferError(.invalidRequest, "url: bad")))
        }
        XCTAssertEqual(assembler.count, 0)
        // A later part of the dropped batch is refused, never queued as a new batch.
        XCTAssertThrowsError(
            try assembler.receive(owner: 1, batch: "b", requests: [download("e")], final: true, check: accept)
        ) {
            XCTAssertEqual(($0 as? RPCError)?.code, RPCErrorCode.invalidParams)
        }
    }

    func testThatTwoRequestsOfABatchWithOneDestinationAreRefused() throws {
        _ = try assembler.receive(owner: 1, batch: "b", requests: [download("a")], final: false, check: accept)
        XCTAssertThrowsError(
            try assembler.receive(
                owner: 1, batch: "b", requests: [download("b"), download("a")], final: true, check: accept)
        ) { error in
            XCTAssertEqual((error as? BatchRefusal)?.index, 2)
            XCTAssertEqual((error as? BatchRefusal)?.error.code, .destinationExists)
        }
        XCTAssertThrowsError(
            try BatchAssembler.checkDistinctDestinations([download("x"), download("y"), download("x")])
        ) {
            XCTAssertEqual(($0 as? BatchRefusal)?.index, 2)
        }
    }

    func testThatABatchWithoutAPartFor60SecondsIsDropped() throws {
        _ = try assembler.receive(owner: 1, batch: "old", requests: [download("a")], final: false, check: accept)
        now += 30
        _ = try assembler.receive(owner: 1, batch: "young", requests: [download("b")], final: false, check: accept)
        now += 29
        _ = try assembler.receive(owner: 1, batch: "old", requests: [download("c")], final: false, check: accept)
        now += 31
        XCTAssertEqual(assembler.expire().map(\.batch), ["young"])
        XCTAssertEqual(assembler.count, 1)
        now += 28
        XCTAssertEqual(assembler.expire(), [])
        now += 1
        XCTAssertEqual(assembler.expire().map(\.batch), ["old"])
        XCTAssertThrowsError(try assembler.receive(owner: 1, batch: "old", requests: [], final: true, check: accept))
    }

    func testThatAClosedConnectionDropsItsBatchesOnlyAndBatchesAreSeparatePerConnection() throws {
        _ = try assembler.receive(owner: 1, batch: "b", requests: [download("a")], final: false, check: accept)
        _ = try assembler.receive(owner: 2, batch: "b", requests: [download("a")], final: false, check: accept)
        assembler.drop(owner: 1)
        XCTAssertEqual(assembler.count, 1)
        XCTAssertEqual(
            try assembler.receive(owner: 2, batch: "b", requests: [], final: true, check: accept),
            .complete([download("a")]))
        // The number of a closed connection is never reused, but a dropped batch is forgotten with it.
        XCTAssertEqual(
            try assembler.receive(owner: 1, batch: "b", requests: [download("z")], final: true, check: accept),
            .complete([download("z")]))
    }
}
