import XCTest

@testable import aftransfer

final class JobTableTests: XCTestCase {
    func testThatAnEmptyQueueRendersNoLinesSoThatListCanSayNoJobs() {
        XCTAssertEqual(JobTable.lines([]), [])
    }

    func testThatOneJobRendersTheHeaderAndOneRowAlignedUnderIt() {
        let lines = JobTable.lines([JobFixture.job(id: 7, state: .queued)])
        XCTAssertEqual(
            lines,
            [
                "ID  STATE   DONE  BYTES  RATE  TARGET",
                " 7  queued    --    0 B     -  /data/big.iso",
            ])
    }

    func testThatNumbersAreRightAlignedWordsLeftAlignedAndTheTargetIsNotPadded() {
        let jobs = [
            JobFixture.job(
                id: 9, state: .running, bytes: 512 * 1024, total: 1024 * 1024, fraction: 0.5, rate: 2048),
            JobFixture.job(id: 10, state: .completed, destination: "/d/x", bytes: 100, total: 100, fraction: 1),
        ]
        XCTAssertEqual(
            JobTable.lines(jobs),
            [
                "ID  STATE      DONE              BYTES       RATE  TARGET",
                " 9  running     50%  512.0 KiB/1.0 MiB  2.0 KiB/s  /data/big.iso",
                "10  completed  100%        100 B/100 B          -  /d/x",
            ])
    }

    func testThatADownloadWhoseNameIsNotKnownYetShowsItsURLAndAnUploadItsURL() {
        let lines = JobTable.lines([
            JobFixture.job(id: 1, destination: nil),
            JobFixture.job(id: 2, kind: .upload, url: "http://example.com/u/report.pdf", destination: "/home/r.pdf"),
        ])
        XCTAssertTrue(lines[1].hasSuffix("  http://example.com/files/big.iso"), lines[1])
        XCTAssertTrue(lines[2].hasSuffix("  http://example.com/u/report.pdf"), lines[2])
    }

    func testThatOnlyARunningJobShowsARate() {
        let lines = JobTable.lines([JobFixture.job(state: .paused, bytes: 10, rate: 999)])
        XCTAssertFalse(lines[1].contains("B/s"), lines[1])
    }
}
