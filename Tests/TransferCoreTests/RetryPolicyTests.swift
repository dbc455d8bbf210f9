import XCTest

@testable import TransferBase
@testable import TransferCore

final class RetryPolicyTests: XCTestCase {
    private let policy = RetryPolicy()

    func testThatTheDefaultsMatchTheSpec() {
        XCTAssertEqual(RetryPolicy.defaultRetryLimit, 8)
        XCTAssertEqual(RetryPolicy().retryLimit, 8)
        XCTAssertEqual(RetryPolicy.retryableStatuses, [408, 429, 500, 502, 503, 504])
    }

    func testThatBackoffDoublesFromHalfASecond() {
        XCTAssertEqual(policy.backoff(forRetry: 1, jitter: 0), 0.5)
        XCTAssertEqual(policy.backoff(forRetry: 2, jitter: 0), 1)
        XCTAssertEqual(policy.backoff(forRetry: 3, jitter: 0), 2)
        XCTAssertEqual(policy.backoff(forRetry: 4, jitter: 0), 4)
        XCTAssertEqual(policy.backoff(forRetry: 10, jitter: 0), 256)
    }

    func testThatBackoffIsCappedAtFiveMinutes() {
        XCTAssertEqual(policy.backoff(forRetry: 11, jitter: 0), 300)
        XCTAssertEqual(policy.backoff(forRetry: 1000, jitter: 0), 300)
        XCTAssertEqual(policy.backoff(forRetry: Int.max, jitter: 0), 300)
    }

    func testThatJitterIsAtMostAQuarterEitherWay() {
        XCTAssertEqual(policy.backoff(forRetry: 3, jitter: 1), 2.5)
        XCTAssertEqual(policy.backoff(forRetry: 3, jitter: -1), 1.5)
        XCTAssertEqual(policy.backoff(forRetry: 3, jitter: 5), 2.5)
        XCTAssertEqual(policy.backoff(forRetry: 3, jitter: -5), 1.5)
        XCTAssertEqual(policy.backoff(forRetry: 3, jitter: .nan), 2)
        XCTAssertEqual(policy.backoff(forRetry: 20, jitter: 1), 375)
    }

    func testThatARetryNumberBelowOneCountsAsTheFirst() {
        XCTAssertEqual(policy.backoff(forRetry: 0, jitter: 0), 0.5)
        XCTAssertEqual(policy.backoff(forRetry: -3, jitter: 0), 0.5)
    }

    func testThatRetryAfterIsHonouredAsAMinimum() {
        XCTAssertEqual(policy.delay(forRetry: 1, retryAfter: 30, jitter: 0), 30)
        XCTAssertEqual(policy.delay(forRetry: 5, retryAfter: 1, jitter: 0), 8)
        XCTAssertEqual(policy.delay(forRetry: 2, retryAfter: nil, jitter: 0), 1)
        XCTAssertEqual(policy.delay(forRetry: 2, retryAfter: 0, jitter: 0), 1)
        XCTAssertEqual(policy.delay(forRetry: 1, retryAfter: 3600, jitter: 1), 3600)
        XCTAssertEqual(policy.delay(forRetry: 2, retryAfter: .infinity, jitter: 0), 1)
    }

    func testThatRetryableErrorsAreRetriedUntilTheLimit() {
        let error = TransferError(.network, "reset")
        XCTAssertTrue(policy.shouldRetry(error: error, retriesUsed: 0))
        XCTAssertTrue(policy.shouldRetry(error: error, retriesUsed: 7))
        XCTAssertFalse(policy.shouldRetry(error: error, retriesUsed: 8))
    }

    func testThatNonRetryableErrorsAreNeverRetried() {
        XCTAssertFalse(policy.shouldRetry(error: TransferError(.tls, "bad cert"), retriesUsed: 0))
        XCTAssertFalse(policy.shouldRetry(error: TransferError(.checksum, "mismatch"), retriesUsed: 0))
        XCTAssertFalse(policy.shouldRetry(error: RetryPolicy.error(forHTTPStatus: 404), retriesUsed: 0))
    }

    func testThatZeroOrNegativeRetriesMeansOneAttempt() {
        let error = TransferError(.timeout, "slow")
        XCTAssertFalse(RetryPolicy(retryLimit: 0).shouldRetry(error: error, retriesUsed: 0))
        XCTAssertFalse(RetryPolicy(retryLimit: -1).shouldRetry(error: error, retriesUsed: 0))
        XCTAssertTrue(RetryPolicy(retryLimit: 1).shouldRetry(error: error, retriesUsed: 0))
    }

    func testThatHTTPStatusErrorsAreRetryableOnlyForTheListedStatuses() {
        for status in [408, 429, 500, 502, 503, 504] {
            let error = RetryPolicy.error(forHTTPStatus: status)
            XCTAssertEqual(error.code, .httpStatus)
            XCTAssertTrue(error.retryable, "\(status)")
        }
        for status in [300, 400, 401, 403, 404, 410, 416, 501, 505, 599] {
            XCTAssertFalse(RetryPolicy.error(forHTTPStatus: status).retryable, "\(status)")
        }
    }

    func testThatHTTPStatusMessagesCarryTheReasonPhrase() {
        XCTAssertEqual(RetryPolicy.error(forHTTPStatus: 404).message, "HTTP 404 Not Found")
        XCTAssertEqual(RetryPolicy.error(forHTTPStatus: 503).message, "HTTP 503 Service Unavailable")
        XCTAssertEqual(RetryPolicy.error(forHTTPStatus: 599).message, "HTTP 599")
    }

    // MARK: Retry-After

    /// 1994-11-06T08:49:37Z, the RFC's example date.
    private let rfcExample = Date(timeIntervalSince1970: 784_111_777)

    func testThatDelaySecondsAreParsed() {
        XCTAssertEqual(RetryPolicy.parseRetryAfter("120", now: Date()), 120)
        XCTAssertEqual(RetryPolicy.parseRetryAfter("0", now: Date()), 0)
        XCTAssertEqual(RetryPolicy.parseRetryAfter(" 5 ", now: Date()), 5)
    }

    func testThatAllThreeHTTPDateFormatsAreParsed() {
        let now = rfcExample.addingTimeInterval(-60)
        XCTAssertEqual(RetryPolicy.parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now: now), 60)
        XCTAssertEqual(RetryPolicy.parseRetryAfter("Sunday, 06-Nov-94 08:49:37 GMT", now: now), 60)
        XCTAssertEqual(RetryPolicy.parseRetryAfter("Sun Nov  6 08:49:37 1994", now: now), 60)
        XCTAssertEqual(RetryPolicy.parseRetryAfter("Sun Nov 16 08:49:37 1994", now: now), 60 + 10 * 86_400)
    }

    func testThatAFutureDateAfterTheYear2000IsParsed() {
        let now = Date(timeIntervalSince1970: 1_798_761_600)  // 2027-01-01T00:00:00Z
        XCTAssertEqual(RetryPolicy.parseRetryAfter("Fri, 01 Jan 2027 00:01:00 GMT", now: now), 60)
        XCTAssertEqual(RetryPolicy.parseRetryAfter("Friday, 01-Jan-27 00:01:00 GMT", now: now), 60)
        XCTAssertEqual(RetryPolicy.parseRetryAfter("Mon, 29 Feb 2028 00:00:00 GMT", now: now), 424 * 86_400)
    }

    func testThatAPastDateMeansNoWait() {
        XCTAssertEqual(RetryPolicy.parseRetryAfter("Sun, 06 Nov 1994 08:49:37 GMT", now: Date()), 0)
    }

    func testThatOnly429And503SayHowLongToWait() {
        XCTAssertEqual(RetryPolicy.retryAfter(status: 503, value: "7"), 7)
        XCTAssertEqual(RetryPolicy.retryAfter(status: 429, value: " 3 "), 3)
        XCTAssertNil(RetryPolicy.retryAfter(status: 500, value: "7"))
        XCTAssertNil(RetryPolicy.retryAfter(status: nil, value: "7"))
        XCTAssertNil(RetryPolicy.retryAfter(status: 503, value: nil))
    }

    func testThatGarbageIsRefused() {
        for value in [
            "", "soon", "-5", "1.5", "5s", "0x10", "Sun, 06 Nov 1994 08:49:37 PST", "Sun, 32 Nov 1994 08:49:37 GMT",
            "Sun, 06 Foo 1994 08:49:37 GMT", "Sun, 06 Nov 1994 25:49:37 GMT", "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 6 Nov 1994 08:49:37 GMT", "Tue, 29 Feb 2027 00:00:00 GMT", "Sun Nov  6 08:49:37", "06 Nov 1994",
        ] {
            XCTAssertNil(RetryPolicy.parseRetryAfter(value, now: rfcExample), value)
        }
    }

    func testThatAnEnormousRetryAfterWaitsAtMostOneDay() {
        let policy = RetryPolicy()
        let huge = RetryPolicy.parseRetryAfter(String(repeating: "9", count: 400), now: Date())
        XCTAssertLessThanOrEqual(policy.delay(forRetry: 1, retryAfter: huge, jitter: 0), RetryPolicy.maxRetryAfter)
        XCTAssertEqual(policy.delay(forRetry: 1, retryAfter: 1e300, jitter: 0), RetryPolicy.maxRetryAfter)
        XCTAssertEqual(policy.delay(forRetry: 1, retryAfter: 120, jitter: 0), 120)
    }

    func testThatTimestampsOfAbsurdValuesDoNotTrap() {
        XCTAssertEqual(Timestamp.rfc3339(.infinity), "1970-01-01T00:00:00Z")
        XCTAssertEqual(Timestamp.rfc3339(1e300), "9999-12-31T23:59:59Z")
    }
}
