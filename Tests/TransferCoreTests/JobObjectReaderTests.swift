import Foundation
import XCTest

@testable import TransferBase
@testable import TransferCore

/// ``JobObjectReader`` must give what the tree path gives (``JSONParser``, then
/// ``JobSnapshot/init(jsonValue:codingPath:)``) or nothing: it may leave a text to the tree path,
/// never read it differently. And it must read the daemon's usual objects itself, or it is no
/// fast path at all.
final class JobObjectReaderTests: XCTestCase {
    /// A download as the daemon sends it many times a second: ASCII, no escapes, one attempt.
    private func download(id: Int64 = 1999, state: TransferState = .completed) -> JobSnapshot {
        var job = JobSnapshot(
            id: id, kind: .download, url: "http://127.0.0.1:48829/small/f001998.bin", method: "GET", state: state,
            destination: "/tmp/out/f001998.bin", bytes: 16384, total: 16384, fraction: 1, rate: 0, eta: 0,
            attempts: 1, httpStatus: 200, error: nil, waitReason: nil, nextRetryAt: nil, insecure: false,
            sha256: String(repeating: "9f", count: 32), createdAt: "2026-11-28T03:33:42.520Z",
            updatedAt: "2026-11-28T03:33:43.539Z", completedAt: "2026-11-28T03:33:43.539Z",
            history: [
                AttemptRecord(
                    attempt: 1, startedAt: "2026-11-28T03:33:43.532Z", endedAt: "2026-11-28T03:33:43.539Z",
                    httpStatus: 200, bytes: 16384, nameLookup: 4e-06, connect: 0, tls: 0, firstByte: 0.000449,
                    total: 0.000449, error: nil)
            ])
        job.connections = 0
        return job
    }

    /// Every member set, nested objects, escapes and non-ASCII text (mostly the tree path's).
    private func full() -> JobSnapshot { JobSnapshot.everyMemberSet }

    /// The daemon's text of `job`.
    private func daemonText(_ job: JobSnapshot) -> [UInt8] {
        var writer = JobJSONWriter(capacity: 1024)
        writer.write(job)
        return writer.bytes
    }

    private func tree(_ text: [UInt8]) -> JobSnapshot? {
        try? JobSnapshot(jsonValue: try JSONParser.parse(text), codingPath: [])
    }

    /// The fast path gives nothing or what the tree path gives; returns what it gave.
    @discardableResult
    private func assertNeverDiffers(_ text: [UInt8], file: StaticString = #filePath, line: UInt = #line)
        -> JobSnapshot?
    {
        guard let fast = JobObjectReader.snapshot(text) else { return nil }
        XCTAssertEqual(fast, tree(text), String(decoding: text, as: UTF8.self), file: file, line: line)
        // Written out again, so that what `==` does not tell apart (-0.0 and 0.0) is told apart.
        XCTAssertEqual(tree(text).map(daemonText), daemonText(fast), file: file, line: line)
        return fast
    }

    func testThatTheDaemonsUsualObjectsAreReadOnTheFastPathAsTheTreeReadsThem() throws {
        for job in [download(), download(id: 1, state: .queued), download(id: 2, state: .running)] {
            let text = daemonText(job)
            XCTAssertEqual(JobObjectReader.snapshot(text), job)
            XCTAssertEqual(JobObjectReader.snapshot(text), tree(text))
        }
        // Without the members a job may lack, and with non-ASCII text (valid UTF-8).
        var sparse = download()
        sparse.history = []
        sparse.destination = "/tmp/out/é ü 日本.bin"
        sparse.connections = nil
        var text = daemonText(sparse)
        XCTAssertEqual(JobObjectReader.snapshot(text), tree(text))
        XCTAssertNotNil(JobObjectReader.snapshot(text))
        // Whitespace between tokens, members in another order: JSON all the same.
        let encoder = JSONEncoder()
        encoder.outputFormatting = .withoutEscapingSlashes  // `\/` is an escape: the tree's
        text = Array(try encoder.encode(download()))
        text = Array(" \n".utf8) + text.flatMap { $0 == UInt8(ascii: ",") ? Array(" ,\t".utf8) : [$0] } + [0x0A]
        XCTAssertEqual(JobObjectReader.snapshot(text), download())
    }

    func testThatNestedObjectsAndEscapesAreReadAsTheTreeReadsThem() {
        let text = daemonText(full())
        XCTAssertEqual(tree(text), full())
        assertNeverDiffers(text)
        // A nested `error` (read through the tree from its own text) on the fast path.
        var failed = download(state: .failed)
        failed.error = TransferError(.httpStatus, "HTTP 404", retryable: false)
        failed.history[0].error = failed.error
        XCTAssertEqual(assertNeverDiffers(daemonText(failed)), failed)
    }

    func testThatWhatTheTreeRefusesOrReadsOtherwiseIsLeftToIt() {
        let good = String(decoding: daemonText(download()), as: UTF8.self)
        let cases: [(String, String)] = [
            (#""id":1999"#, #""id":1999.0"#),  // the tree reads 1999; left to it
            (#""id":1999"#, #""id":1999,"id":1999"#),  // a member twice: the tree refuses
            (#""state":"completed""#, #""state":"sleeping""#),  // not a state
            (#""url":"http"#, #""url":"h\u0074tp"#),  // an escape: left to the tree
            (#""bytes":16384"#, #""bytes":"16384""#),
            (#""insecure":false"#, #""insecure":0"#),
            (#""kind":"download","#, ""),  // a required member missing
            (#""attempt":1,"#, ""),  // an attempt's required member missing
            (#""rate":0"#, #""rate":1e999"#),  // out of range
            (#""total":16384"#, #""total":9223372036854775808"#),  // more than 64 bits
            (#""total":16384"#, #""total":016384"#),  // a leading zero
            (#""total":16384"#, #""total":16384,"extra":1,"extra":2"#),  // unknown members: the tree's
            (#""url":"#, #""u\u0072l":"#),  // an escaped name
        ]
        for (from, to) in cases {
            XCTAssertTrue(good.contains(from), from)
            let text = Array(good.replacingOccurrences(of: from, with: to).utf8)
            XCTAssertNil(JobObjectReader.snapshot(text), to)
        }
        XCTAssertNil(JobObjectReader.snapshot(Array((good + "x").utf8)))  // text after the object
        XCTAssertNil(JobObjectReader.snapshot(Array(good.utf8.dropLast())))  // cut short
        XCTAssertNil(JobObjectReader.snapshot(Array(good.utf8) + [0xFF]))
        var invalid = Array(good.utf8)
        invalid[invalid.firstIndex(of: UInt8(ascii: "f"))!] = 0xC3  // a lone lead byte in a string
        XCTAssertNil(JobObjectReader.snapshot(invalid))
        XCTAssertNil(JobObjectReader.snapshot(Array("[]".utf8)))
        XCTAssertNil(JobObjectReader.snapshot(Array("null".utf8)))
    }

    func testThatMinusZeroIsZeroAsTheTreeReadsIt() throws {
        var job = download(state: .running)
        job.rate = -0.0
        job.history[0].connect = -0.0
        let text = daemonText(job)
        XCTAssertTrue(String(decoding: text, as: UTF8.self).contains(#""rate":-0"#))
        let fast = try XCTUnwrap(assertNeverDiffers(text))
        XCTAssertEqual(fast.rate.sign, .plus)
        XCTAssertEqual(fast.history[0].connect?.sign, .plus)
    }

    func testThatDeepNestingInANestedObjectIsLeftToTheTree() {
        let good = String(decoding: daemonText(download()), as: UTF8.self)
        for depth in [40, 600] {
            let deep = String(repeating: "[", count: depth) + String(repeating: "]", count: depth)
            let text = good.replacingOccurrences(
                of: #""error":null,"eta""#,
                with: #""error":{"code":"io","message":"m","retryable":false,"x":"# + deep + #"},"eta""#)
            XCTAssertNotEqual(text, good)
            XCTAssertNil(JobObjectReader.snapshot(Array(text.utf8)), "\(depth)")
        }
    }

    /// Any byte of a job's text changed to any value: the fast path gives nothing or the tree's.
    func testThatNoChangedByteMakesTheFastPathDifferFromTheTree() {
        var rng = SplitMix(seed: 7)
        let texts = [daemonText(download()), daemonText(full())]
        let alphabet = Array(#"{}[]":,.-+eE0123456789 \"tfnul"#.utf8) + [0x00, 0x1F, 0x7F, 0x80, 0xC3, 0xFF]
        var readFast = 0
        for round in 0..<6000 {
            var text = texts[round % texts.count]
            for _ in 0...(round % 3) {
                let at = Int(rng.next() % UInt64(text.count))
                text[at] =
                    rng.next() % 2 == 0 ? alphabet[Int(rng.next() % UInt64(alphabet.count))] : UInt8(rng.next() & 0xFF)
            }
            if assertNeverDiffers(text) != nil { readFast += 1 }
        }
        XCTAssertGreaterThan(readFast, 100, "the changed texts the fast path still read")
    }

    func testThatEachMemberNameConstantIsItsNamePacked() {
        for (key, name) in memberNames {
            XCTAssertEqual(key, JSONByteCursor.Key(name), "\(name)")
        }
        XCTAssertEqual(Set(memberNames.map { "\($0.1)" }).count, memberNames.count)
    }

    func testThatANotificationIsReadWhateverTheOrderOfItsMembers() {
        let job = daemonText(download(state: .running))
        let sorted = Array(#"{"jsonrpc":"2.0","method":"transfer.state","params":"#.utf8) + job + Array("}".utf8)
        let paramsFirst =
            Array(#"{"params":"#.utf8) + job + Array(#","method":"transfer.progress","jsonrpc":"2.0"}"#.utf8)
        for (text, method) in [(sorted, "transfer.state"), (paramsFirst, "transfer.progress")] {
            let n: (method: String, job: JobSnapshot)? =
                switch text.withUnsafeBytes({ JobObjectReader.notification($0) }) {
                case .state(let job)?: (RPCMethod.transferState.rawValue, job)
                case .progress(let job)?: (RPCMethod.transferProgress.rawValue, job)
                default: nil
                }
            XCTAssertEqual(n?.method, method)
            XCTAssertEqual(n?.job, download(state: .running))
        }
        for text in [
            #"{"jsonrpc":"2.0","id":3,"result":{"subscribed":true}}"#,  // a response
            #"{"jsonrpc":"2.0","method":"daemon.stopping","params":{"reason":"signal"}}"#,  // no job
            #"{"jsonrpc":"1.0","method":"transfer.state","params":{}}"#,
            #"{"jsonrpc":"2.0","method":"daemon.something","params":"# + String(decoding: job, as: UTF8.self) + "}",
            #"{"method":"transfer.state"}"#,
        ] {
            XCTAssertNil(Array(text.utf8).withUnsafeBytes { JobObjectReader.notification($0) }, text)
        }
    }

    func testThatAJobsResponseIsReadWithItsNulls() {
        let a = daemonText(download(id: 5, state: .queued))
        let b = daemonText(download(id: 7, state: .queued))
        let line =
            Array(#"{"id":4,"jsonrpc":"2.0","result":{"jobs":["#.utf8) + a + Array(",null,".utf8) + b
            + Array("]}}".utf8)
        let jobs = line.withUnsafeBytes { JobObjectReader.jobsResponse($0, id: 4) }
        XCTAssertEqual(jobs, [download(id: 5, state: .queued), nil, download(id: 7, state: .queued)])
        XCTAssertNil(line.withUnsafeBytes { JobObjectReader.jobsResponse($0, id: 5) }, "another request's answer")
        let more = Array(line.dropLast(2)) + Array(#","other":[1,{"x":"]"}]}}"#.utf8)
        XCTAssertNil(more.withUnsafeBytes { JobObjectReader.jobsResponse($0, id: 4) }, "a result with more: the tree's")
        for text in [
            #"{"id":4,"jsonrpc":"2.0","error":{"code":-32602,"message":"no"}}"#,
            #"{"id":4,"jsonrpc":"2.0","result":{}}"#,
            #"{"id":4,"jsonrpc":"2.0","result":{"jobs":[1]}}"#,
        ] {
            XCTAssertNil(Array(text.utf8).withUnsafeBytes { JobObjectReader.jobsResponse($0, id: 4) }, text)
        }
        let empty = Array(#"{"id":4,"jsonrpc":"2.0","result":{"jobs":[]}}"#.utf8)
        XCTAssertEqual(empty.withUnsafeBytes { JobObjectReader.jobsResponse($0, id: 4) }, [])
    }
}

extension JobObjectReader {
    /// The job object that fills `bytes` (whitespace around it allowed), or nil when the tree path
    /// must read it (or refuse it).
    static func snapshot(_ bytes: [UInt8]) -> JobSnapshot? {
        bytes.withUnsafeBytes { raw in
            var cursor = JSONByteCursor(raw)
            guard let job = try? cursor.jobObject(), cursor.atEnd() else { return nil }
            return job
        }
    }
}

extension JSONByteCursor.Key {
    /// `name` packed as the cursor packs a member name it reads.
    init(_ name: StaticString) {
        var low: UInt64 = 0
        var high: UInt64 = 0
        for k in 0..<name.utf8CodeUnitCount {
            let byte = UInt64(name.utf8Start[k])
            if k < 8 { low |= byte << (8 * k) } else { high |= byte << (8 * (k - 8)) }
        }
        self.init(low: low, high: high)
    }
}

/// Each member-name constant and its name.
private let memberNames: [(JSONByteCursor.Key, StaticString)] = [
    (JobMemberName.id, "id"),
    (JobMemberName.kind, "kind"),
    (JobMemberName.url, "url"),
    (JobMemberName.method, "method"),
    (JobMemberName.state, "state"),
    (JobMemberName.destination, "destination"),
    (JobMemberName.bytes, "bytes"),
    (JobMemberName.total, "total"),
    (JobMemberName.fraction, "fraction"),
    (JobMemberName.rate, "rate"),
    (JobMemberName.eta, "eta"),
    (JobMemberName.attempts, "attempts"),
    (JobMemberName.httpStatus, "httpStatus"),
    (JobMemberName.error, "error"),
    (JobMemberName.waitReason, "waitReason"),
    (JobMemberName.nextRetryAt, "nextRetryAt"),
    (JobMemberName.insecure, "insecure"),
    (JobMemberName.sha256, "sha256"),
    (JobMemberName.createdAt, "createdAt"),
    (JobMemberName.updatedAt, "updatedAt"),
    (JobMemberName.completedAt, "completedAt"),
    (JobMemberName.history, "history"),
    (JobMemberName.response, "response"),
    (JobMemberName.uploadUrl, "uploadUrl"),
    (JobMemberName.resumable, "resumable"),
    (JobMemberName.hook, "hook"),
    (JobMemberName.connections, "connections"),
    (JobMemberName.attempt, "attempt"),
    (JobMemberName.startedAt, "startedAt"),
    (JobMemberName.endedAt, "endedAt"),
    (JobMemberName.nameLookup, "nameLookup"),
    (JobMemberName.connect, "connect"),
    (JobMemberName.tls, "tls"),
    (JobMemberName.firstByte, "firstByte"),
    (JobMemberName.jsonrpc, "jsonrpc"),
    (JobMemberName.params, "params"),
    (JobMemberName.result, "result"),
    (JobMemberName.jobs, "jobs"),
]
