import TransferBase
import XCTest

@testable import aftransfer

final class QueueViewTests: XCTestCase {
    private let running = JobFixture.job(
        id: 12, state: .running, destination: "/data/big.iso", bytes: 512 * 1024, total: 1024 * 1024, fraction: 0.5,
        rate: 100 * 1024, eta: 5.2)

    func testThatAJobLineShowsIdNameStateBarBytesRateAndEtaWithinTheWidth() {
        let line = QueueView.jobLine(running, columns: 119)
        XCTAssertTrue(line.hasPrefix("#12    big.iso              running   ["), line)
        for part in ["=====", " 50%", "512.0 KiB/1.0 MiB", "100.0 KiB/s", "ETA 6s"] {
            XCTAssertTrue(line.contains(part), "\(part) missing in \(line)")
        }
        XCTAssertLessThanOrEqual(line.count, 119)
        XCTAssertLessThanOrEqual(QueueView.jobLine(running, columns: 40).count, 40)
    }

    func testThatAnEightyColumnLineStillHasTheBarBytesRateAndEta() {
        var job = running
        job.destination = "/data/a-rather-long-name-for-a-file.iso"
        job.bytes = 191_078
        job.total = 799_948
        job.rate = 100_352
        for columns in [79, 75] {
            let line = QueueView.jobLine(job, columns: columns)
            XCTAssertLessThanOrEqual(line.count, columns, line)
            for part in ["#12 ", "running", "[==", "186.6 KiB/781.2 KiB", "98.0 KiB/s", "ETA "] {
                XCTAssertTrue(line.contains(part), "\(part) missing in \(line) (\(columns) columns)")
            }
        }
    }

    func testThatAWideNameNeverMakesALineWiderThanTheTerminal() {
        var job = running
        job.destination = "/data/日本語のファイル名テスト日本語のファイル名テスト日本語.bin"
        for columns in [119, 99, 79, 71, 49, 30, 12] {
            let line = QueueView.jobLine(job, columns: columns)
            XCTAssertLessThanOrEqual(TerminalColumns.width(line), columns, line)
        }
        XCTAssertTrue(QueueView.jobLine(job, columns: 119).contains("ETA 6s"))
    }

    func testThatNarrowTerminalsKeepBytesRateAndEtaBeforeTheBar() {
        var job = running
        job.destination = "/data/minutes.bin"
        for columns in [69, 59] {
            let line = QueueView.jobLine(job, columns: columns)
            XCTAssertLessThanOrEqual(TerminalColumns.width(line), columns, line)
            for part in ["#12 ", "running", "512.0 KiB/1.0 MiB", "100.0 KiB/s", "ETA 6s"] {
                XCTAssertTrue(line.contains(part), "\(part) missing in \(line) (\(columns) columns)")
            }
        }
    }

    func testThatEveryLineOfAScreenTakesTheSameLayout() {
        let waiting = JobFixture.job(id: 13, state: .waiting, destination: "/data/w.iso", bytes: 1024, total: 4096)
        var slow = running
        slow.id = 9
        slow.eta = 780
        for columns in [119, 99, 79] {
            let lines = QueueView.screen([running, slow, waiting], gone: [], columns: columns + 1, rows: 10).dropLast()
            let stateColumns = lines.map { line in
                TerminalColumns.width(
                    String(line[..<line.range(of: line.contains("running") ? "running" : "waiting")!.lowerBound]))
            }
            XCTAssertEqual(Set(stateColumns).count, 1, "\(columns) columns: \(lines)")
        }
    }

    func testThatANarrowScreensBarsHaveOneWidthAndItsFiguresFormColumns() {
        // An outside audit at 80 columns: each line stretched its bar to its own end (12, 14, 25
        // columns), so the percents and bytes of the lines did not line up; at 40 one line kept a
        // bar the others had lost.
        let big = JobFixture.job(
            id: 19, state: .running, destination: "/d/long1.bin", bytes: 800 * 1024, total: 40_000_000,
            fraction: 0.02, rate: 20 * 1024, eta: 1950)
        let wide = JobFixture.job(
            id: 20, state: .running, destination: "/d/非常に長い名前.bin", bytes: 216 * 1024, total: 21_300_000,
            fraction: 0.01, rate: 10 * 1024, eta: 2100)
        let queued = JobFixture.job(id: 23, state: .queued, destination: "/d/queued.bin")
        for columns in [80, 100] {
            let lines = Array(QueueView.screen([big, wide, queued], gone: [], columns: columns, rows: 10).dropLast())
            let opens = lines.map { TerminalColumns.width(String($0[..<$0.firstIndex(of: "[")!])) }
            let closes = lines.map { TerminalColumns.width(String($0[..<$0.firstIndex(of: "]")!])) }
            XCTAssertEqual(Set(opens).count, 1, "\(columns) columns: \(lines)")
            XCTAssertEqual(Set(closes).count, 1, "\(columns) columns: \(lines)")
            for line in lines { XCTAssertLessThanOrEqual(TerminalColumns.width(line), columns - 1, line) }
        }
        let narrow = Array(QueueView.screen([big, wide, queued], gone: [], columns: 40, rows: 10).dropLast())
        XCTAssertEqual(Set(narrow.map { $0.contains("[") }).count, 1, "one layout at 40 columns: \(narrow)")
    }

    func testThatARedrawKeepsTheLayoutWhenAJobsFiguresGrowByADigit() {
        // At 70 columns the bars went from every line when 9.7 MiB became 10.7 MiB.
        var job = JobFixture.job(
            id: 7, state: .running, destination: "/d/a.bin", bytes: 10_171_187, total: 20_027_801, fraction: 0.5,
            rate: 1_048_576, eta: 9)
        var other = job
        other.id = 8
        other.destination = "/d/b.bin"
        var widest = QueueView.FigureWidths([])
        let first = QueueView.screen([job, other], gone: [], columns: 70, rows: 10, figuresAtLeast: &widest)
        job.bytes = 11_220_000
        other.rate = 9_000
        let second = QueueView.screen([job, other], gone: [], columns: 70, rows: 10, figuresAtLeast: &widest)
        XCTAssertEqual(
            first.dropLast().map { $0.firstIndex(of: "]") != nil },
            second.dropLast().map { $0.firstIndex(of: "]") != nil },
            "\(first)\n\(second)")
        XCTAssertEqual(
            first.dropLast().map { TerminalColumns.width(String($0.prefix { $0 != "]" })) },
            second.dropLast().map { TerminalColumns.width(String($0.prefix { $0 != "]" })) }, "\(first)\n\(second)")
    }

    func testThatAQueuedJobHasAnEmptyBarAndNoRateOrEta() {
        let queued = JobFixture.job(id: 3, state: .queued, destination: "/data/a-very-long-file-name-indeed.tar.gz")
        let line = QueueView.jobLine(queued, columns: 119)
        XCTAssertTrue(line.hasPrefix("#3     a-very-long-file-na… queued    ["), line)
        XCTAssertFalse(line.contains("ETA"))
    }

    func testThatTenThousandJobsShowWhatFitsAndSayHowManyMore() {
        let jobs = (1...10_000).map { JobFixture.job(id: Int64($0), state: $0 <= 4 ? .running : .queued) }
        let lines = QueueView.screen(jobs, gone: [], columns: 80, rows: 25)
        XCTAssertEqual(lines.count, 24)
        XCTAssertTrue(lines[0].hasPrefix("#1 "))
        XCTAssertEqual(lines[22], "… and 9978 more")
        XCTAssertTrue(lines[23].hasPrefix("Total: 10000 jobs (4 running, 9996 queued)"), lines[23])
        XCTAssertTrue(lines.allSatisfy { $0.count <= 79 })
    }

    func testThatTheTotalsLineAddsBytesAndRatesOfEveryJobAndCountsEndedOnes() {
        var other = running
        other.id = 13
        let done = JobFixture.job(id: 14, state: .completed, bytes: 1024 * 1024, total: 1024 * 1024, fraction: 1)
        let line = QueueView.totalsLine([running, other, done], gone: [])
        XCTAssertEqual(line, "Total: 3 jobs (2 running, 1 ended)  2.0 MiB/3.0 MiB  200.0 KiB/s  ETA 6s")
        let lines = QueueView.screen([running, other, done], gone: [], columns: 120, rows: 40)
        XCTAssertEqual(lines.count, 3, "ended jobs leave the list, not the totals")
    }

    /// A cancelled or failed job's missing bytes never come: they are not in the total or the ETA
    /// (a cancelled 19 MiB job kept the ETA at 43 s beside a job that had 2 s to go).
    func testThatTheTotalsLineLeavesOutWhatFailedOrCancelledJobsWillNeverGet() {
        let cancelled = JobFixture.job(id: 15, state: .cancelled, bytes: 1024 * 1024, total: 20 * 1024 * 1024)
        let failed = JobFixture.job(id: 16, state: .failed, bytes: 0, total: nil)
        let line = QueueView.totalsLine([running, cancelled, failed], gone: [])
        XCTAssertEqual(line, "Total: 3 jobs (1 running, 2 ended)  512.0 KiB/1.0 MiB  100.0 KiB/s  ETA 6s")
    }

    func testThatATinyTerminalStillShowsTheTotalsLine() {
        XCTAssertEqual(QueueView.screen([running], gone: [], columns: 80, rows: 2).count, 1)
        XCTAssertEqual(
            QueueView.screen([running, running], gone: [], columns: 80, rows: 3),
            [
                "… and 2 more", QueueView.totalsLine([running, running], gone: []),
            ])
    }

    func testThatARedrawMovesUpOverTheLastScreenAndClearsWhatIsLeft() {
        var out: [String] = []
        var time = 0.0
        let view = QueueView(terminalSize: { (80, 25) }, write: { out.append($0) }, clock: { time })
        var other = running
        other.id = 13
        view.update([running, other])
        time += 1
        view.update([running])
        XCTAssertEqual(out.count, 2)
        XCTAssertFalse(out[0].contains("\u{1B}[2A"))
        XCTAssertTrue(out[1].hasPrefix("\r\u{1B}[2A"), out[1])
        XCTAssertTrue(out[1].hasSuffix("\u{1B}[K\u{1B}[J"))
        view.update([running])
        XCTAssertEqual(out.count, 2, "at most a few redraws a second")
        view.finish([running])
        XCTAssertEqual(out.last, "\n")
    }
}
