import Foundation
import TransferBase
import XCTest

@testable import aftransfer

final class JobTextTests: XCTestCase {
    func testThatTheNameIsTheDestinationsLastComponentOrElseTheURLs() {
        XCTAssertEqual(JobText.name(JobFixture.job(destination: "/data/x/file.bin")), "file.bin")
        XCTAssertEqual(JobText.name(JobFixture.job(destination: nil)), "big.iso")
        XCTAssertEqual(
            JobText.name(JobFixture.job(url: "http://example.com/", destination: nil)), "http://example.com/")
    }

    func testThatTheLastPathComponentIsNSStringsWithoutFoundation() {
        for path in [
            "/data/x/file.bin", "file.bin", "/", "//", "///", "", "/a", "a/", "/a/b//", "/dir/é ü.bin", "a//b", "/.x",
            "..",
        ] {
            XCTAssertEqual(JobText.lastPathComponent(path), (path as NSString).lastPathComponent, path)
        }
    }

    func testThatTheAmountShowsTheTotalOnlyWhenKnown() {
        XCTAssertEqual(JobText.amount(JobFixture.job(bytes: 2048)), "2.0 KiB")
        XCTAssertEqual(JobText.amount(JobFixture.job(bytes: 2048, total: 4096)), "2.0 KiB/4.0 KiB")
    }

    func testThatTheFractionComesFromTheJobOrElseFromBytesAndTotal() {
        XCTAssertEqual(JobText.fraction(JobFixture.job(bytes: 1, total: 4, fraction: 0.3)), 0.3)
        XCTAssertEqual(JobText.fraction(JobFixture.job(bytes: 1, total: 4)), 0.25)
        XCTAssertNil(JobText.fraction(JobFixture.job(bytes: 1, total: 0)))
        XCTAssertNil(JobText.fraction(JobFixture.job(bytes: 1)))
    }

    func testThatAnErrorIsShownAsCodeColonMessage() {
        let job = JobFixture.job(state: .failed, error: TransferError(.httpStatus, "HTTP 404"))
        XCTAssertEqual(JobText.error(job), "http_status: HTTP 404")
        XCTAssertNil(JobText.error(JobFixture.job()))
    }

    func testThatAJobWaitingOnATimerSaysWhenItRetries() throws {
        let now = try XCTUnwrap(JobText.date("2026-11-23T20:00:00Z"))
        let job = JobFixture.job(state: .waiting, waitReason: .backoff, nextRetryAt: "2026-11-23T20:00:03.250Z")
        XCTAssertEqual(JobText.waiting(job, now: now), "backoff, retry in 4s")
        XCTAssertEqual(
            JobText.waiting(JobFixture.job(state: .waiting, waitReason: .offline), now: now),
            "offline, until the network returns")
        XCTAssertNil(JobText.waiting(JobFixture.job(state: .running, waitReason: .backoff), now: now))
    }

    func testThatTheStatusSummaryListsTheFieldsAlignedThenTheAttempts() throws {
        let now = try XCTUnwrap(JobText.date("2026-11-23T20:00:00Z"))
        let attempt = AttemptRecord(
            attempt: 1, startedAt: "2026-11-23T20:00:01Z", endedAt: "2026-11-23T20:00:02Z", httpStatus: 503,
            bytes: 0, nameLookup: 0.001, connect: 0.002, firstByte: 0.01, total: 1.5,
            error: TransferError(.httpStatus, "HTTP 503"))
        let job = JobFixture.job(
            id: 12, state: .waiting, bytes: 0, error: TransferError(.httpStatus, "HTTP 503", retryable: true),
            waitReason: .backoff, nextRetryAt: "2026-11-23T20:00:02Z", history: [attempt])
        XCTAssertEqual(
            JobSummary.lines(job, now: now),
            [
                "Job 12 (download)",
                "  State:       waiting",
                "  URL:         http://example.com/files/big.iso",
                "  Method:      GET",
                "  Destination: /data/big.iso",
                "  Progress:    0 B (--)",
                "  Attempts:    1",
                "  HTTP status: 503",
                "  Error:       http_status: HTTP 503 (retryable)",
                "  Waiting:     backoff, retry in 2s",
                "  Next retry:  2026-11-23T20:00:02Z",
                "  Created:     2026-11-23T20:00:00Z",
                "  Updated:     2026-11-23T20:00:05Z",
                "  History:",
                "    #1  2026-11-23T20:00:01Z → 2026-11-23T20:00:02Z  HTTP 503  0 B  dns 1ms  connect 2ms  first byte 10ms  total 1.50s  http_status: HTTP 503",
            ])
    }

    func testThatTheSummaryOfAnUploadShowsItsSourceAndUpToTwentyLinesOfTheKeptResponse() {
        let body = (1...25).map { "line \($0)" }.joined(separator: "\n")
        let job = JobFixture.job(
            kind: .upload, state: .completed, destination: nil,
            response: ResponseInfo(status: 201, headers: [:], body: body))
        let lines = JobSummary.lines(job)
        XCTAssertTrue(lines.contains("  Source:    (multipart form)"), "\(lines)")
        XCTAssertTrue(lines.contains("  Response:  HTTP 201, \(body.count) characters of its body kept"), "\(lines)")
        XCTAssertEqual(lines.suffix(21).first, "  Response body:")
        XCTAssertEqual(lines.last, "    line 20")
    }

    func testThatTheSummaryShowsTheOnEndHooksExitStatusAndFirstLine() {
        var job = JobFixture.job(state: .completed, bytes: 10, total: 10)
        job.hook = HookResult(exitStatus: 3, output: "\nno space for the copy\nmore")
        XCTAssertTrue(
            JobSummary.lines(job).contains { $0.hasSuffix("On-end hook: exit 3: no space for the copy") },
            "\(JobSummary.lines(job))")
    }

    func testThatTextFromOutsideReachesTheTerminalWithoutItsControlCharacters() {
        let hostile = "HTTP 500 \u{1B}[2J\u{1B}]0;owned\u{07}"
        let job = JobFixture.job(
            state: .failed, destination: "/data/a\u{1B}[31mb.bin", error: TransferError(.httpStatus, hostile),
            response: ResponseInfo(status: 500, headers: [:], body: "ok\n\u{1B}[1A\u{1B}[Kforged line"))
        XCTAssertEqual(JobText.name(job), "a^[[31mb.bin")
        XCTAssertEqual(JobText.target(job), "/data/a^[[31mb.bin")
        XCTAssertEqual(JobText.error(job), "http_status: HTTP 500 ^[[2J^[]0;owned^G")
        let summary = JobSummary.lines(job)
        XCTAssertFalse(summary.joined().unicodeScalars.contains { $0.value == 0x1B || $0.value == 0x07 }, "\(summary)")
        XCTAssertTrue(summary.contains("    ^[[1A^[[Kforged line"), "\(summary)")
    }
}
