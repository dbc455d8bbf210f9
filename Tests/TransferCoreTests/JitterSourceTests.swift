import XCTest

@testable import TransferBase
@testable import TransferCore

final class JitterSourceTests: XCTestCase {
    func testThatSamplesStayInMinusOneToOneAndSpreadOverBothSides() {
        var source = JitterSource(seed: 42)
        let samples = (0..<10_000).map { _ in source.sample() }
        XCTAssertTrue(samples.allSatisfy { (-1...1).contains($0) })
        XCTAssertGreaterThan(samples.filter { $0 < -0.5 }.count, 2_000)
        XCTAssertGreaterThan(samples.filter { $0 > 0.5 }.count, 2_000)
        XCTAssertLessThan(abs(samples.reduce(0, +) / Double(samples.count)), 0.05)
    }

    func testThatOneSeedGivesOneSequenceAndTwoSourcesDiffer() {
        var a = JitterSource(seed: 7)
        var b = JitterSource(seed: 7)
        XCTAssertEqual((0..<5).map { _ in a.next() }, (0..<5).map { _ in b.next() })
        var c = JitterSource()
        var d = JitterSource()
        XCTAssertNotEqual((0..<4).map { _ in c.next() }, (0..<4).map { _ in d.next() })
    }
}
