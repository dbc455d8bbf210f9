import XCTest

@testable import TransferBase
@testable import TransferCore

/// The arithmetic of segmented downloads: ranges, work stealing, the contiguous prefix.
final class SegmentPlanTests: XCTestCase {
    private let mib: Int64 = 1 << 20

    func testThatAFreshPlanSplitsTheFileIntoEqualSegmentsThatTileIt() {
        let p = SegmentPlan(total: 10 * mib + 3, connections: 4)
        XCTAssertEqual(p.segments.count, 4)
        XCTAssertEqual(p.segments.first?.start, 0)
        XCTAssertEqual(p.segments.last?.end, 10 * mib + 3)
        for (a, b) in zip(p.segments, p.segments.dropFirst()) { XCTAssertEqual(a.end, b.start) }
    }

    func testThatNoSegmentIsSmallerThanTheMinimumSplit() {
        XCTAssertEqual(SegmentPlan(total: 3 * mib, connections: 16).segments.count, 3)
        XCTAssertEqual(SegmentPlan(total: mib / 2, connections: 8).segments.count, 1)
    }

    func testThatTheContiguousPrefixGrowsOnlyThroughCompleteSegments() {
        var p = SegmentPlan(total: 4 * mib, connections: 2)
        p.advance(2 * mib, by: mib)
        XCTAssertEqual(p.contiguousEnd, 0)
        p.advance(0, by: 2 * mib)
        XCTAssertEqual(p.contiguousEnd, 3 * mib)
        XCTAssertEqual(p.fetchedBytes, 3 * mib)
        XCTAssertEqual(p.advance(2 * mib, by: 2 * mib), mib, "bytes past a segment's end are not counted")
        XCTAssertTrue(p.isComplete)
        XCTAssertEqual(p.contiguousEnd, 4 * mib)
    }

    func testThatAFinishedConnectionTakesHalfOfTheLargestRemainder() {
        var p = SegmentPlan(total: 8 * mib, connections: 2)
        p.advance(0, by: 4 * mib)
        p.advance(4 * mib, by: mib)
        let stolen = p.nextWork(busy: [4 * mib])
        XCTAssertEqual(stolen, 5 * mib + 3 * mib / 2)
        XCTAssertEqual(p.segment(4 * mib)?.end, stolen)
        XCTAssertEqual(p.segment(stolen ?? 0)?.end, 8 * mib)
        XCTAssertEqual(p.segments.count, 3)
    }

    func testThatARemainderOfMoreThanOneMiBIsSplitAndOneOfAtMostOneMiBIsNot() {
        var p = SegmentPlan(total: 4 * mib, connections: 2)
        p.advance(0, by: 2 * mib)
        p.advance(2 * mib, by: mib / 2)
        XCTAssertEqual(p.nextWork(busy: [2 * mib]), 2 * mib + mib / 2 + 3 * mib / 4, "1.5 MiB left: split")
        var q = SegmentPlan(total: 4 * mib, connections: 2)
        q.advance(0, by: 2 * mib)
        q.advance(2 * mib, by: mib)
        XCTAssertNil(q.nextWork(busy: [2 * mib]), "exactly 1 MiB left: no split")
    }

    func testThatAnUnfetchedSegmentNobodyFetchesIsTakenBeforeStealing() {
        var p = SegmentPlan(total: 12 * mib, connections: 3)
        XCTAssertEqual(p.nextWork(busy: [0, 4 * mib]), 8 * mib)
        XCTAssertEqual(p.segments.count, 3)
    }

    func testThatDurableOffsetsFollowTheSyncsAndSurviveStorage() throws {
        var p = SegmentPlan(total: 6 * mib, connections: 3)
        p.advance(0, by: 100)
        p.advance(2 * mib, by: 200)
        let atSync = p.fetchOffsets
        p.advance(0, by: 50)
        p.markDurable(atSync)
        XCTAssertEqual(p.segment(0)?.durable, 100)
        XCTAssertEqual(p.segment(2 * mib)?.durable, 2 * mib + 200)
        XCTAssertEqual(p.durableBytes, 300)
        let back = try XCTUnwrap(SegmentPlan(storedText: p.storedText, total: 6 * mib))
        XCTAssertEqual(back.segment(0)?.fetched, 100, "a resumed segment starts at its durable offset")
        XCTAssertEqual(back.segment(4 * mib)?.fetched, 4 * mib)
        XCTAssertNil(SegmentPlan(storedText: p.storedText, total: 7 * mib), "ranges must tile the file")
        XCTAssertNil(SegmentPlan(storedText: "[[0,5,9]]", total: 5))
    }
}
