import XCTest

@testable import TransferBase
@testable import TransferCore

/// The protocol side of resumable uploads, without a network: which request follows which
/// response (SPEC "Resumable uploads").
final class ResumableUploadPlanTests: XCTestCase {
    private let url = "http://h.example/up"
    private let length: Int64 = 1000

    private func plan(
        _ mode: ResumableMode = .auto, uploadURL: String? = nil, agreed: ResumableProtocol? = nil, offset: Int64 = 0,
        limit: Int64? = nil, sha256: String? = nil, refused: Bool = false
    ) -> ResumableUploadPlan {
        ResumableUploadPlan(
            mode: mode, url: url, method: "PUT", length: length, contentType: "text/plain", filename: "a b.txt",
            sha256Hex: sha256, uploadURL: uploadURL, agreed: agreed, offset: offset, appendLimit: limit,
            completionRefused: refused)
    }

    private func response(_ status: Int, _ headers: [String: String] = [:]) -> ResumableUploadPlan.Response {
        ResumableUploadPlan.Response(status: status, headers: headers)
    }

    private func sent(_ v: ResumableUploadPlan.Verdict, file: StaticString = #filePath, line: UInt = #line)
        -> ResumableUploadPlan.Request?
    {
        guard case .send(let r) = v else {
            XCTFail("expected a request, got \(v)", file: file, line: line)
            return nil
        }
        return r
    }

    func testThatAutoStartsWithAnOptimisticIETFCreationOfTheWholeFile() {
        var p = plan()
        let r = p.first()
        XCTAssertEqual(r.purpose, .create)
        XCTAssertEqual(r.method, "PUT")
        XCTAssertEqual(r.url, url)
        XCTAssertEqual(r.bodyOffset, 0)
        XCTAssertEqual(r.bodyLength, length)
        XCTAssertTrue(r.completes)
        XCTAssertTrue(r.headers.contains("Upload-Draft-Interop-Version: 8"))
        XCTAssertTrue(r.headers.contains("Upload-Complete: ?1"))
        XCTAssertTrue(r.headers.contains("Upload-Length: 1000"))
        XCTAssertFalse(r.headers.contains { $0.hasPrefix("Repr-Digest") })
    }

    func testThatA104WithLocationGivesTheUploadURLResolvedAgainstTheRequestURL() {
        var p = plan()
        _ = p.first()
        XCTAssertFalse(p.interim(response(100)))
        XCTAssertFalse(
            p.interim(response(104, ["location": "/res/6", "upload-draft-interop-version": "7"])),
            "a server of another interop version: a plain upload")
        XCTAssertFalse(p.interim(response(104, ["location": "/res/6"])), "no version: not the draft we speak")
        XCTAssertNil(p.uploadURL)
        XCTAssertTrue(
            p.interim(
                response(
                    104,
                    [
                        "location": "/res/7", "upload-limit": "max-append-size=300",
                        "upload-draft-interop-version": "8",
                    ])))
        XCTAssertEqual(p.uploadURL, "http://h.example/res/7")
        XCTAssertEqual(p.agreed, .ietf)
        XCTAssertEqual(p.appendLimit, 300)
    }

    /// An answer before the body's end says nothing of what the server kept: its offset is asked
    /// (and, should it keep doing that, more and more slowly, as after 409s), never taken as whole.
    func testThatAnAnswerBeforeTheBodyEndedAsksTheOffsetAsAfterA409() {
        var p = plan()
        _ = p.first()
        XCTAssertTrue(
            p.interim(response(104, ["location": "/res/7", "upload-draft-interop-version": "8"])))
        let ask = sent(p.answeredBeforeTheBodyEnded())
        XCTAssertEqual(ask?.purpose, .offset)
        XCTAssertEqual(ask?.method, "HEAD")
        XCTAssertEqual(ask?.url, "http://h.example/res/7")
        XCTAssertEqual(p.offset, 0, "nothing acknowledged")
        for _ in 1..<ResumableUploadPlan.maxConflictsInARow { _ = sent(p.answeredBeforeTheBodyEnded()) }
        guard case .sendAfter(_, let seconds) = p.answeredBeforeTheBodyEnded() else { return XCTFail() }
        XCTAssertEqual(seconds, ResumableUploadPlan.firstConflictDelay)
        var plain = plan()
        _ = plain.first()
        guard case .failed = plain.answeredBeforeTheBodyEnded() else { return XCTFail("no upload URL to ask") }
    }

    func testThatAServerWithout104CompletesAsAPlainUploadOrFailsWithTheStatus() {
        var p = plan()
        _ = p.first()
        XCTAssertEqual(p.received(response(201)), .completed)
        XCTAssertNil(p.uploadURL)
        var q = plan()
        _ = q.first()
        guard case .failed(let e) = q.received(response(503)) else { return XCTFail() }
        XCTAssertTrue(e.retryable)
        XCTAssertNil(q.uploadURL)
    }

    func testThatAResumedAttemptAsksForTheOffsetThenAppendsTheRestWithCompleteTrue() throws {
        var p = plan(uploadURL: "http://h.example/res/7", agreed: .ietf, offset: 100)
        let head = p.first()
        XCTAssertEqual(head.method, "HEAD")
        XCTAssertEqual(head.url, "http://h.example/res/7")
        XCTAssertTrue(head.headers.contains("Upload-Draft-Interop-Version: 8"))
        let patch = try XCTUnwrap(sent(p.received(response(204, ["upload-offset": "400", "upload-complete": "?0"]))))
        XCTAssertEqual(patch.method, "PATCH")
        XCTAssertEqual(patch.bodyOffset, 400)
        XCTAssertEqual(patch.bodyLength, 600)
        XCTAssertTrue(patch.headers.contains("Content-Type: application/partial-upload"))
        XCTAssertTrue(patch.headers.contains("Upload-Offset: 400"))
        XCTAssertTrue(patch.headers.contains("Upload-Complete: ?1"))
        XCTAssertEqual(p.offset, 400)
        XCTAssertEqual(p.received(response(200)), .completed)
        XCTAssertEqual(p.offset, length)
    }

    func testThatAppendsRespectTheAppendLimitWithCompleteFalseBeforeTheLast() throws {
        var p = plan(uploadURL: "http://h.example/res/7", agreed: .ietf, limit: 400)
        _ = p.first()
        let a = try XCTUnwrap(sent(p.received(response(204, ["upload-offset": "0"]))))
        XCTAssertEqual([a.bodyOffset, a.bodyLength], [0, 400])
        XCTAssertTrue(a.headers.contains("Upload-Complete: ?0"))
        let b = try XCTUnwrap(sent(p.received(response(204))))
        XCTAssertEqual([b.bodyOffset, b.bodyLength], [400, 400])
        let c = try XCTUnwrap(sent(p.received(response(204))))
        XCTAssertEqual([c.bodyOffset, c.bodyLength], [800, 200])
        XCTAssertTrue(c.headers.contains("Upload-Complete: ?1"))
        XCTAssertTrue(c.completes)
        XCTAssertEqual(p.received(response(200)), .completed)
    }

    func testThatA413WithMaxAppendSizeShrinksAppendsAndA409AsksAgainWithoutFailing() throws {
        var p = plan(uploadURL: "http://h.example/res/7", agreed: .ietf)
        _ = p.first()
        let big = try XCTUnwrap(sent(p.received(response(204, ["upload-offset": "0"]))))
        XCTAssertEqual(big.bodyLength, 1000)
        let head = try XCTUnwrap(sent(p.received(response(413, ["upload-limit": "max-size=9, max-append-size=250"]))))
        XCTAssertEqual(head.method, "HEAD")
        XCTAssertEqual(p.appendLimit, 250)
        let small = try XCTUnwrap(sent(p.received(response(204, ["upload-offset": "0"]))))
        XCTAssertEqual(small.bodyLength, 250)
        let again = try XCTUnwrap(sent(p.received(response(409))))
        XCTAssertEqual(again.method, "HEAD")
        let next = try XCTUnwrap(sent(p.received(response(204, ["upload-offset": "250"]))))
        XCTAssertEqual(next.bodyOffset, 250)
    }

    func testThatA413WithoutALimitFailsTheAttempt() {
        var p = plan(uploadURL: "http://h.example/res/7", agreed: .ietf)
        _ = p.first()
        _ = p.received(response(204, ["upload-offset": "0"]))
        guard case .failed(let e) = p.received(response(413)) else { return XCTFail() }
        XCTAssertEqual(e.code, .httpStatus)
    }

    func testThatEndless409sNeverEndTheAttemptButAskAgainMoreSlowly() throws {
        var q = plan(uploadURL: "http://h.example/res/7", agreed: .ietf)
        _ = q.first()
        for _ in 0..<ResumableUploadPlan.maxConflictsInARow {
            _ = try XCTUnwrap(sent(q.received(response(204, ["upload-offset": "0"]))))
            _ = try XCTUnwrap(sent(q.received(response(409))))
        }
        var waits: [Double] = []
        for _ in 0..<8 {
            _ = try XCTUnwrap(sent(q.received(response(204, ["upload-offset": "0"]))))
            guard case .sendAfter(let ask, let seconds) = q.received(response(409)) else { return XCTFail() }
            XCTAssertEqual(ask.method, "HEAD")
            waits.append(seconds)
        }
        XCTAssertEqual(waits, [0.5, 1, 2, 4, 8, 15, 15, 15])
        // An accepted append starts the count again.
        let append = try XCTUnwrap(sent(q.received(response(204, ["upload-offset": "0"]))))
        XCTAssertEqual(append.method, "PATCH")
        _ = try XCTUnwrap(sent(q.received(response(204, ["upload-offset": "400"]))))
        XCTAssertEqual(q.received(response(409)), .send(try XCTUnwrap(q.current)))
        XCTAssertEqual(ResumableUploadPlan.conflictDelay(after: 10_000), ResumableUploadPlan.maxConflictDelay)
    }

    func testThatALocationIsResolvedAgainstTheURLThatAnsweredAfterARedirect() {
        var p = plan()
        _ = p.first()
        var interim = response(104, ["upload-draft-interop-version": "8", "location": "/res/9"])
        interim.url = "http://other.example:8080/up"
        XCTAssertTrue(p.interim(interim))
        XCTAssertEqual(p.uploadURL, "http://other.example:8080/res/9")
        var t = plan(.tus)
        _ = t.first()
        var created = response(201, ["location": "files/3"])
        created.url = "http://tus.example/api/"
        _ = t.received(created)
        XCTAssertEqual(t.uploadURL, "http://tus.example/api/files/3")
    }

    func testThatAnAnswerTheProtocolDoesNotAllowIsNotRetried() {
        var t = plan(.tus)
        _ = t.first()
        guard case .failed(let e) = t.received(response(201)) else { return XCTFail() }
        XCTAssertFalse(e.retryable)
        var h = plan(uploadURL: "http://h.example/res/7", agreed: .ietf, offset: 300)
        _ = h.first()
        guard case .failed(let f) = h.received(response(200)) else { return XCTFail() }
        XCTAssertFalse(f.retryable)
    }

    func testThatAGoneUploadURLStartsOverAsARetry() {
        for status in [404, 410] {
            var p = plan(uploadURL: "http://h.example/res/7", agreed: .ietf, offset: 300)
            _ = p.first()
            guard case .failed(let e) = p.received(response(status)) else { return XCTFail() }
            XCTAssertTrue(e.retryable)
            // True whether a retry is left or the job fails with it (then `retry` starts over):
            // "the upload starts over" was the message of jobs that had failed.
            XCTAssertTrue(e.message.hasSuffix("the upload URL is gone; a retry starts the upload over from byte 0"))
            XCTAssertNil(p.uploadURL)
            XCTAssertNil(p.agreed)
            XCTAssertEqual(p.offset, 0)
            XCTAssertEqual(p.first().purpose, .create)
        }
    }

    func testThatAHeadShowingTheUploadCompleteEndsIt() {
        var p = plan(uploadURL: "http://h.example/res/7", agreed: .ietf)
        _ = p.first()
        XCTAssertEqual(p.received(response(204, ["upload-offset": "1000", "upload-complete": "?1"])), .completed)
    }

    func testThatSha256IsSentAsReprDigestOnlyOnTheCompletingRequest() throws {
        let hex = String(repeating: "ab", count: 32)
        let want = "Repr-Digest: sha-256=:\(ResumableUploadPlan.base64(ofHex: hex) ?? ""):"
        var p = plan(sha256: hex)
        XCTAssertTrue(p.first().headers.contains(want))
        var q = plan(uploadURL: "http://h.example/res/7", agreed: .ietf, limit: 600, sha256: hex)
        _ = q.first()
        let a = try XCTUnwrap(sent(q.received(response(204, ["upload-offset": "0"]))))
        XCTAssertFalse(a.headers.contains(want))
        let b = try XCTUnwrap(sent(q.received(response(204))))
        XCTAssertTrue(b.headers.contains(want))
    }

    func testThatOffSendsAPlainUploadWithNoUploadHeaders() {
        var p = plan(.off)
        let r = p.first()
        XCTAssertEqual(r.purpose, .plain)
        XCTAssertEqual(r.headers, ["Content-Type: text/plain"])
        XCTAssertFalse(p.interim(response(104, ["location": "/res/1"])))
        XCTAssertEqual(p.received(response(200)), .completed)
    }

    func testThatTusCreatesWithPostThenPatchesUntilTheServerOffsetReachesTheLength() throws {
        var p = plan(.tus)
        let post = p.first()
        XCTAssertEqual(post.method, "POST")
        XCTAssertEqual(post.bodyLength, 0)
        XCTAssertTrue(post.headers.contains("Tus-Resumable: 1.0.0"))
        XCTAssertTrue(post.headers.contains("Upload-Length: 1000"))
        XCTAssertTrue(post.headers.contains("Upload-Metadata: filename YSBiLnR4dA==,filetype dGV4dC9wbGFpbg=="))
        guard case .failed = p.received(response(201)) else { return XCTFail("a 201 without Location") }
        var q = plan(.tus)
        _ = q.first()
        let patch = try XCTUnwrap(sent(q.received(response(201, ["location": "files/abc"]))))
        XCTAssertEqual(q.uploadURL, "http://h.example/files/abc")
        XCTAssertEqual(q.agreed, .tus)
        XCTAssertEqual(patch.method, "PATCH")
        XCTAssertTrue(patch.headers.contains("Content-Type: application/offset+octet-stream"))
        XCTAssertTrue(patch.headers.contains("Upload-Offset: 0"))
        XCTAssertTrue(patch.headers.contains("Tus-Resumable: 1.0.0"))
        // The server took only part: the next PATCH goes on from its offset.
        let more = try XCTUnwrap(sent(q.received(response(204, ["upload-offset": "700"]))))
        XCTAssertEqual(more.bodyOffset, 700)
        XCTAssertEqual(q.received(response(204, ["upload-offset": "1000"])), .completed)
    }

    /// Found by an outside audit: an append's answer stating an offset past the end, before the
    /// append's start, or not a number was taken as "all of it arrived".
    func testThatAnAppendsAnswerWithAnImpossibleOffsetFailsTheAttempt() throws {
        for bad in ["5000", "abc", "-1"] {
            var p = plan(.tus, uploadURL: "http://h.example/files/abc", agreed: .tus, offset: 100)
            _ = p.first()
            let patch = try XCTUnwrap(sent(p.received(response(200, ["upload-offset": "100"]))))
            XCTAssertEqual(patch.bodyOffset, 100)
            guard case .failed(let e) = p.received(response(204, ["upload-offset": bad])) else {
                return XCTFail("offset \(bad) was accepted")
            }
            XCTAssertFalse(e.retryable, bad)
            XCTAssertTrue(e.message.contains("offset"), e.message)
        }
        var back = plan(.tus, uploadURL: "http://h.example/files/abc", agreed: .tus, offset: 100)
        _ = back.first()
        _ = try XCTUnwrap(sent(back.received(response(200, ["upload-offset": "600"]))))
        guard case .failed = back.received(response(204, ["upload-offset": "300"])) else {
            return XCTFail("an offset before the append's start was accepted")
        }
    }

    /// Found by an outside audit: a tus `PATCH` answered `204` without `Upload-Offset` was taken
    /// as "every byte of it arrived", and the job completed with the server short of bytes.
    func testThatATusAppendAnsweredWithoutAnOffsetAsksTheServerWithHead() throws {
        var p = plan(.tus, uploadURL: "http://h.example/files/abc", agreed: .tus, offset: 0)
        _ = p.first()
        let patch = try XCTUnwrap(sent(p.received(response(200, ["upload-offset": "0"]))))
        XCTAssertEqual(patch.bodyLength, 1000)
        let head = try XCTUnwrap(sent(p.received(response(204))))
        XCTAssertEqual(head.method, "HEAD")
        // The server kept 400 bytes: the rest goes from there, and only its offset ends the upload.
        let more = try XCTUnwrap(sent(p.received(response(200, ["upload-offset": "400"]))))
        XCTAssertEqual(more.bodyOffset, 400)
        XCTAssertEqual(p.received(response(204, ["upload-offset": "1000"])), .completed)
    }

    /// A code review: a server that answers without an offset and keeps nothing must not be sent
    /// the rest again and again at once: from the second round without progress, the asks slow
    /// down as after a 409.
    func testThatATusServerKeepingNothingIsAskedEverMoreSlowly() throws {
        var p = plan(.tus, uploadURL: "http://h.example/files/abc", agreed: .tus, offset: 0)
        _ = p.first()
        _ = try XCTUnwrap(sent(p.received(response(200, ["upload-offset": "0"]))))
        var waited = false
        for _ in 0..<10 {
            switch p.received(response(204)) {  // the PATCH, answered without an offset
            case .send(let head):
                XCTAssertEqual(head.method, "HEAD")
            case .sendAfter(let head, let seconds):
                XCTAssertEqual(head.method, "HEAD")
                XCTAssertGreaterThan(seconds, 0)
                waited = true
            default:
                return XCTFail("neither asked nor waited")
            }
            let again = try XCTUnwrap(sent(p.received(response(200, ["upload-offset": "0"]))))  // kept nothing
            XCTAssertEqual(again.bodyOffset, 0)
        }
        XCTAssertTrue(waited, "never slowed down")
    }

    /// Found by outside audits: a `500` to the request that completed the upload, after the
    /// server had read all of it, left the upload URL for the retry, whose `HEAD` said "complete"
    /// and ended the job well on the `HEAD`'s answer; forgetting the upload at once (the first
    /// fix) re-sent the whole file even when the server had kept none of that request.
    func testThatARefusedCompletingRequestResumesUnlessTheServerSaysItHoldsEveryByte() throws {
        var p = plan(uploadURL: "http://h.example/res/1", agreed: .ietf, offset: 400)
        _ = p.first()
        let append = try XCTUnwrap(sent(p.received(response(204, ["upload-offset": "400"]))))
        XCTAssertTrue(append.completes)
        guard case .failed(let e) = p.received(response(500)) else { return XCTFail("a 500 completed") }
        XCTAssertTrue(e.retryable)
        XCTAssertEqual(p.uploadURL, "http://h.example/res/1", "kept: the next attempt asks the offset")
        XCTAssertTrue(p.completionRefused)

        // The next attempt (told by the history entry): the server kept none of it: resumed.
        var kept = plan(uploadURL: "http://h.example/res/1", agreed: .ietf, offset: 400, refused: true)
        XCTAssertEqual(kept.first().method, "HEAD")
        let again = try XCTUnwrap(sent(kept.received(response(204, ["upload-offset": "400"]))))
        XCTAssertEqual(again.bodyOffset, 400)
        XCTAssertTrue(again.completes)
        XCTAssertEqual(kept.received(response(201, ["upload-offset": "\(length)"])), .completed)

        // It holds every byte: not taken as the end; a new upload from a new first request.
        var whole = plan(uploadURL: "http://h.example/res/1", agreed: .ietf, offset: 400, refused: true)
        _ = whole.first()
        let create = try XCTUnwrap(
            sent(whole.received(response(204, ["upload-offset": "\(length)", "upload-complete": "?1"]))))
        XCTAssertEqual(create.method, "PUT")
        XCTAssertEqual(create.url, url)
        XCTAssertEqual(create.bodyOffset, 0)
        XCTAssertNil(whole.uploadURL)
        XCTAssertFalse(whole.completionRefused)
        // The same for tus (a POST, then the whole file).
        var tus = plan(.tus, uploadURL: "http://h.example/files/abc", agreed: .tus, offset: 400, refused: true)
        _ = tus.first()
        XCTAssertEqual(try XCTUnwrap(sent(tus.received(response(200, ["upload-offset": "\(length)"])))).method, "POST")
        // Without the refusal, "complete" is the end (a cut after the server had everything).
        var cut = plan(uploadURL: "http://h.example/res/1", agreed: .ietf, offset: 400)
        _ = cut.first()
        XCTAssertEqual(
            cut.received(response(204, ["upload-offset": "\(length)", "upload-complete": "?1"])), .completed)

        // A refused append that was not the last is not a refused completion.
        var q = plan(uploadURL: "http://h.example/res/1", agreed: .ietf, offset: 0, limit: 300)
        _ = q.first()
        let first = try XCTUnwrap(sent(q.received(response(204, ["upload-offset": "0"]))))
        XCTAssertFalse(first.completes)
        guard case .failed = q.received(response(500)) else { return XCTFail("a 500 went on") }
        XCTAssertEqual(q.uploadURL, "http://h.example/res/1")
        XCTAssertFalse(q.completionRefused)
    }

    /// The next attempt learns of a refused completion from the history, which a restart keeps,
    /// read back past refused offset queries and requests a stop or crash cut short (found by an
    /// outside audit: a `HEAD` refused after the refusal hid it, and the next `HEAD`'s "complete"
    /// ended the job on that `HEAD`'s answer).
    func testThatARefusedCompletionIsReadFromTheHistory() throws {
        func entry(_ status: Int?, _ error: TransferError? = nil) -> AttemptRecord {
            AttemptRecord(attempt: 1, startedAt: "2026-11-27T00:00:00Z", httpStatus: status, bytes: 0, error: error)
        }
        var p = plan(uploadURL: "http://h.example/res/1", agreed: .ietf, offset: 400)
        _ = p.first()
        _ = try XCTUnwrap(sent(p.received(response(204, ["upload-offset": "400"]))))
        guard case .failed(let refused) = p.received(response(500)) else { return XCTFail("a 500 completed") }
        var q = plan(uploadURL: "http://h.example/res/1", agreed: .ietf, offset: 400)
        _ = q.first()
        guard case .failed(let headRefused) = q.received(response(503)) else { return XCTFail("a HEAD 503 went on") }
        let cut = TransferError(.network, "curl: (56) Recv failure", retryable: true)

        XCTAssertTrue(UploadTask.completionWasRefused([entry(204), entry(500, refused)]))
        XCTAssertTrue(
            UploadTask.completionWasRefused([entry(500, refused), entry(503, headRefused), entry(503, headRefused)]))
        XCTAssertTrue(UploadTask.completionWasRefused([entry(500, refused), entry(nil)]), "a HEAD a crash cut short")
        XCTAssertFalse(UploadTask.completionWasRefused([entry(500, refused), entry(204)]), "a HEAD answered since")
        XCTAssertFalse(UploadTask.completionWasRefused([entry(500, refused), entry(nil, cut)]), "a request cut since")
        XCTAssertFalse(UploadTask.completionWasRefused([entry(503, headRefused)]))
        XCTAssertFalse(UploadTask.completionWasRefused([entry(nil, cut)]))
        XCTAssertFalse(UploadTask.completionWasRefused([]))
    }

    func testThatTusResumesWithHeadAndCompletesWhenTheOffsetIsTheLength() throws {
        var p = plan(.tus, uploadURL: "http://h.example/files/abc", agreed: .tus, offset: 10)
        let head = p.first()
        XCTAssertEqual(head.method, "HEAD")
        XCTAssertTrue(head.headers.contains("Tus-Resumable: 1.0.0"))
        let patch = try XCTUnwrap(sent(p.received(response(200, ["upload-offset": "512"]))))
        XCTAssertEqual(patch.bodyOffset, 512)
        var done = plan(.tus, uploadURL: "http://h.example/files/abc", agreed: .tus)
        _ = done.first()
        XCTAssertEqual(done.received(response(200, ["upload-offset": "1000"])), .completed)
    }

    func testThatUploadLimitAndLocationsAreParsedStrictly() {
        XCTAssertEqual(ResumableUploadPlan.maxAppendSize("max-append-size=5"), 5)
        XCTAssertEqual(ResumableUploadPlan.maxAppendSize("min-size=1, max-append-size=77;x"), 77)
        XCTAssertNil(ResumableUploadPlan.maxAppendSize("max-size=5"))
        XCTAssertNil(ResumableUploadPlan.resolve("ftp://x/y", against: url))
        XCTAssertEqual(ResumableUploadPlan.resolve("https://o.example/r", against: url), "https://o.example/r")
        var p = plan(uploadURL: "http://h.example/res/7", agreed: .ietf)
        _ = p.first()
        guard case .failed = p.received(response(204, ["upload-offset": "2000"])) else {
            return XCTFail("an offset past the length")
        }
    }
}
