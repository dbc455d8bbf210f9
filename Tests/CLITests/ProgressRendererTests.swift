import TransferBase
import XCTest

@testable import aftransfer

final class ProgressRendererTests: XCTestCase {
    /// A renderer drawing into `output`, on a terminal of `columns` × `rows`, at time `time`.
    private final class Harness {
        var output: [String] = []
        var time = 100.0
        var columns: Int? = 80
        var rows: Int? = 25

        func renderer(_ style: ProgressRenderer.Style, showNames: Bool = true) -> ProgressRenderer {
            ProgressRenderer(
                style: style, showNames: showNames, terminalSize: { (self.columns, self.rows) },
                write: { self.output.append($0) }, clock: { self.time })
        }
    }

    private let running = JobFixture.job(
        id: 12, state: .running, destination: "/data/big.iso", bytes: 512 * 1024, total: 1024 * 1024, fraction: 0.5,
        rate: 100 * 1024, eta: 5.2)

    func testThatARunningJobsBarShowsPercentBytesRateEtaAndName() {
        let line = ProgressRenderer.barLine(running, gone: false, columns: 79, showName: true)
        XCTAssertEqual(
            line,
            "#12 [=======>      ]  50%   512.0 KiB/1.0 MiB   100.0 KiB/s  ETA    6s  big.iso")
        XCTAssertEqual(line.count, 79, "the bar takes the width left over")
    }

    func testThatABarWithoutANameIsWiderAndAJobWithoutATotalHasNoBar() {
        let line = ProgressRenderer.barLine(running, gone: false, columns: 79, showName: false)
        XCTAssertEqual(
            line, "#12 [===========>           ]  50%   512.0 KiB/1.0 MiB   100.0 KiB/s  ETA    6s")
        var unknown = running
        unknown.total = nil
        unknown.fraction = nil
        XCTAssertEqual(
            ProgressRenderer.barLine(unknown, gone: false, columns: 79, showName: true),
            "#12 running   512.0 KiB   100.0 KiB/s  ETA    6s  big.iso")
    }

    func testThatEndedAndRemovedJobsSayWhatHappened() {
        let failed = JobFixture.job(id: 3, state: .failed, error: TransferError(.httpStatus, "HTTP 404"))
        XCTAssertEqual(
            ProgressRenderer.barLine(failed, gone: false, columns: 79, showName: true),
            "#3 failed  http_status: HTTP 404  big.iso")
        XCTAssertEqual(ProgressRenderer.barLine(failed, gone: true, columns: 79, showName: true), "#3 removed  big.iso")
        XCTAssertEqual(
            ProgressRenderer.plainLine(JobFixture.job(id: 4, state: .completed, bytes: 2048), gone: false),
            "4 completed  2.0 KiB  big.iso")
    }

    func testThatPlainLinesComeOncePerStateChangeAndAtMostOnceASecondWhileBytesFlow() {
        let harness = Harness()
        let renderer = harness.renderer(.lines)
        renderer.update([running])
        XCTAssertEqual(harness.output, ["12 running  50%  512.0 KiB/1.0 MiB  100.0 KiB/s  ETA 6s  big.iso\n"])
        var later = running
        later.bytes += 1024
        harness.time += 0.5
        renderer.update([later])
        XCTAssertEqual(harness.output.count, 1, "no second line within a second")
        harness.time += 0.6
        renderer.update([later])
        XCTAssertEqual(harness.output.count, 2)
        harness.time += 2
        renderer.update([later])
        XCTAssertEqual(harness.output.count, 2, "no line while the bytes do not change")
        var done = later
        done.state = .completed
        renderer.update([done])
        XCTAssertEqual(harness.output.last, "12 completed  513.0 KiB  big.iso\n")
    }

    func testThatTheLinesOfOneUpdateGoOutInOneWrite() {
        let harness = Harness()
        let renderer = harness.renderer(.lines)
        var other = running
        other.id = 13
        var unchanged = running
        unchanged.id = 14
        renderer.update([unchanged])
        XCTAssertEqual(harness.output.count, 1)
        var done = running
        done.state = .completed
        renderer.update([done, other, unchanged])
        XCTAssertEqual(harness.output.count, 2, "one write for the update's lines")
        XCTAssertEqual(
            harness.output.last,
            "12 completed  512.0 KiB  big.iso\n13 running  50%  512.0 KiB/1.0 MiB  100.0 KiB/s  ETA 6s  big.iso\n")
        renderer.update([done, other, unchanged])
        XCTAssertEqual(harness.output.count, 2, "nothing changed: no write at all")
    }

    func testThatBarsAreRedrawnInPlaceAndFinishOnAFreshLine() {
        let harness = Harness()
        let renderer = harness.renderer(.bars)
        let other = JobFixture.job(id: 13, state: .queued, destination: "/data/b.bin")
        renderer.update([running, other])
        XCTAssertEqual(harness.output.count, 1)
        XCTAssertTrue(harness.output[0].hasPrefix("\r#12 ["), harness.output[0])
        XCTAssertTrue(harness.output[0].hasSuffix("\n#13 queued  b.bin\u{1B}[K"), harness.output[0])
        harness.time += 0.1
        renderer.update([running, other])
        XCTAssertEqual(harness.output.count, 1, "at most 5 redraws a second")
        harness.time += 0.2
        renderer.update([running, other])
        XCTAssertTrue(harness.output[1].hasPrefix("\r\u{1B}[1A#12 ["), "cursor back up one line: \(harness.output[1])")
        renderer.finish([running, other])
        XCTAssertEqual(harness.output.last, "\n")
    }

    func testThatBarsAreCutToTheTerminalWidthAndRowsToItsHeight() {
        let harness = Harness()
        harness.columns = 41
        harness.rows = 3
        let renderer = harness.renderer(.bars)
        let jobs = (1...5).map {
            JobFixture.job(id: Int64($0), state: .queued, destination: "/d/a-rather-long-file-name-\($0).bin")
        }
        renderer.update(jobs)
        let lines = harness.output[0].dropFirst().components(separatedBy: "\n").map {
            $0.replacingOccurrences(of: "\u{1B}[K", with: "")
        }
        XCTAssertEqual(lines, ["#1 queued  a-rather-long-file-name-1.bin", "… and 4 more"])
        var long = jobs[0]
        long.destination = "/d/" + String(repeating: "x", count: 60)
        renderer.update([long], force: true)
        let first = harness.output.last?.components(separatedBy: "\u{1B}[K").first ?? ""
        XCTAssertTrue(first.hasSuffix("…"), first)
        XCTAssertEqual(first.replacingOccurrences(of: "\r\u{1B}[1A", with: "").count, 40)
    }
}
