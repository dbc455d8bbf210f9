/// Reads a job object from its JSON text straight into a ``JobSnapshot``, without building a
/// ``JSONValue`` tree first: the fast path of a client that follows thousands of jobs (each
/// `transfer.state` notification carries a whole job object, ~750 bytes with its history).
///
/// Written here because the tree costs a dictionary a JSON object (hashing every member name);
/// `aftransfer download -i` of 2,000 small files spent most of its CPU turning events into trees,
/// on a machine whose two cores the daemon and the server needed (docs/benchmarks.md, nineteenth
/// session). It reads only what it is sure of: the members of the job object, attempt records,
/// strings without escapes, plain integers, numbers, `true`/`false`/`null`. Anything else — an
/// escape in a string, a member it does not know or given twice, a value of the wrong type — makes
/// it return nil, and the caller reads the same text through ``JSONParser`` and
/// ``JobSnapshot/init(jsonValue:codingPath:)``; the nested `error`, `hook` and `response` objects
/// are read that way here too. So it never gives a different job than the tree path, only a
/// faster one (JobObjectReaderTests compares the two, also on texts with bytes changed at random).
public enum JobObjectReader {
    /// The job object that fills `bytes` (whitespace around it allowed), or nil when the tree path
    /// must read it (or refuse it).
    public static func snapshot(_ bytes: UnsafeRawBufferPointer) -> JobSnapshot? {
        var cursor = JSONByteCursor(bytes)
        guard let job = try? cursor.jobObject(), cursor.atEnd() else { return nil }
        return job
    }

    /// The job object that fills `bytes`, or nil when the tree path must read it.
    public static func snapshot<C: Collection>(_ bytes: C) -> JobSnapshot? where C.Element == UInt8 {
        if let job = bytes.withContiguousStorageIfAvailable({ snapshot(UnsafeRawBufferPointer($0)) }) { return job }
        return Array(bytes).withUnsafeBytes { snapshot($0) }
    }

    /// A notification line's method and, for a job notification, its job read on the fast path.
    public struct Notification {
        /// The notification's `method`.
        public var method: String
        /// Its `params` read as a job object.
        public var job: JobSnapshot
    }

    /// A notification line (`{"jsonrpc":"2.0","method":M,"params":{job}}`, members in any order)
    /// whose params are a job object this reader can read; nil for anything else (a response, a
    /// notification without a job, text the tree path must read).
    public static func notification(_ line: UnsafeRawBufferPointer) -> Notification? {
        var cursor = JSONByteCursor(line)
        return try? cursor.notification()
    }

    /// The jobs of a response line to request `id` whose result is `{"jobs": [job or null, …]}`
    /// (nil for each `null`); nil for anything else (another response, an error, a result with
    /// other members, text the tree path must read).
    public static func jobsResponse(_ line: UnsafeRawBufferPointer, id: Int64) -> [JobSnapshot?]? {
        var cursor = JSONByteCursor(line)
        return try? cursor.jobsResponse(id: id)
    }
}

/// Not this reader's to decide: the tree path reads the text.
struct NotOnTheFastPath: Error {}

/// A position in JSON text, reading values off it (``JobObjectReader``).
struct JSONByteCursor {
    private let bytes: UnsafeRawBufferPointer
    private var index = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    // MARK: - Tokens

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// Whether only whitespace is left.
    mutating func atEnd() -> Bool {
        skipWhitespace()
        return index == bytes.count
    }

    private mutating func expect(_ byte: UInt8) throws {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == byte else { throw NotOnTheFastPath() }
        index += 1
    }

    /// Consumes `byte` if it comes next.
    private mutating func take(_ byte: UInt8) -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// Consumes `null` if it comes next.
    private mutating func takeNull() throws -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "n") else { return false }
        try literal("null")
        return true
    }

    private mutating func literal(_ word: StaticString) throws {
        let n = word.utf8CodeUnitCount
        guard index + n <= bytes.count else { throw NotOnTheFastPath() }
        for k in 0..<n where bytes[index + k] != word.utf8Start[k] { throw NotOnTheFastPath() }
        index += n
    }

    /// The members of an object: `body` gets each name and must consume its value.
    private mutating func members(_ body: (inout JSONByteCursor, Key) throws -> Void) throws {
        try expect(UInt8(ascii: "{"))
        if take(UInt8(ascii: "}")) { return }
        repeat {
            let name = try key()
            try expect(UInt8(ascii: ":"))
            try body(&self, name)
        } while take(UInt8(ascii: ","))
        try expect(UInt8(ascii: "}"))
    }

    /// A member name of up to 16 ASCII bytes packed into two words, compared without making a
    /// `String` (a `switch` over strings compares them one by one); a longer name is
    /// ``Key/other``.
    struct Key: Equatable {
        var low: UInt64
        var high: UInt64

        /// Any name no member read here has.
        static let other = Key(low: 0, high: 0)

        init(low: UInt64, high: UInt64) {
            self.low = low
            self.high = high
        }

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

    private mutating func key() throws -> Key {
        try expect(UInt8(ascii: "\""))
        var low: UInt64 = 0
        var high: UInt64 = 0
        var k = 0
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "\"") { return k <= 16 ? Key(low: low, high: high) : .other }
            // An escaped or non-ASCII name is no name read here: the tree path's.
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { throw NotOnTheFastPath() }
            if k < 8 {
                low |= UInt64(byte) << (8 * k)
            } else if k < 16 {
                high |= UInt64(byte) << (8 * (k - 8))
            }
            k += 1
        }
        throw NotOnTheFastPath()
    }

    /// A string without escapes or control characters, valid UTF-8.
    mutating func string() throws -> String {
        try expect(UInt8(ascii: "\""))
        let start = index
        var ascii = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                index += 1
                // ASCII needs no validation (and `String(validating:)` is slow, not specialized).
                if ascii { return String(decoding: text, as: UTF8.self) }
                guard let s = String(validating: text, as: UTF8.self) else { throw NotOnTheFastPath() }
                return s
            }
            guard byte != UInt8(ascii: "\\"), byte >= 0x20 else { throw NotOnTheFastPath() }
            if byte >= 0x80 { ascii = false }
            index += 1
        }
        throw NotOnTheFastPath()
    }

    private mutating func optionalString() throws -> String? { try takeNull() ? nil : string() }

    /// A plain integer: digits with an optional minus, no fraction or exponent (the tree path
    /// reads `1.0` or `1e3`).
    private mutating func integer() throws -> Int64 {
        skipWhitespace()
        let negative = take(UInt8(ascii: "-"))
        let start = index
        var value: Int64 = 0
        while index < bytes.count, case let d = bytes[index], d >= UInt8(ascii: "0"), d <= UInt8(ascii: "9") {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(Int64(d - UInt8(ascii: "0")))
            guard !o1, !o2 else { throw NotOnTheFastPath() }
            value = s
            index += 1
        }
        let count = index - start
        guard count > 0, count == 1 || bytes[start] != UInt8(ascii: "0") else { throw NotOnTheFastPath() }
        if index < bytes.count,
            bytes[index] == UInt8(ascii: ".") || bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")
        {
            throw NotOnTheFastPath()
        }
        return negative ? -value : value
    }

    private mutating func optionalInteger() throws -> Int64? { try takeNull() ? nil : integer() }

    private mutating func int() throws -> Int {
        guard let v = Int(exactly: try integer()) else { throw NotOnTheFastPath() }
        return v
    }

    private mutating func optionalInt() throws -> Int? { try takeNull() ? nil : int() }

    /// A number as a `Double`, as the tree path gives it (RFC 8259's grammar; finite).
    private mutating func double() throws -> Double {
        skipWhitespace()
        let start = index
        func digits() -> Int {
            let from = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                index += 1
            }
            return index - from
        }
        _ = take(UInt8(ascii: "-"))
        let intStart = index
        let intDigits = digits()
        guard intDigits > 0, intDigits == 1 || bytes[intStart] != UInt8(ascii: "0") else { throw NotOnTheFastPath() }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw NotOnTheFastPath() }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard digits() > 0 else { throw NotOnTheFastPath() }
        }
        // A short number is a small string: no allocation.
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw NotOnTheFastPath() }
        return value
    }

    private mutating func optionalDouble() throws -> Double? { try takeNull() ? nil : double() }

    private mutating func bool() throws -> Bool {
        skipWhitespace()
        guard index < bytes.count else { throw NotOnTheFastPath() }
        if bytes[index] == UInt8(ascii: "t") {
            try literal("true")
            return true
        }
        try literal("false")
        return false
    }

    private mutating func raw<E: RawRepresentable>(_ type: E.Type) throws -> E where E.RawValue == String {
        guard let value = E(rawValue: try string()) else { throw NotOnTheFastPath() }
        return value
    }

    private mutating func optionalRaw<E: RawRepresentable>(_ type: E.Type) throws -> E? where E.RawValue == String {
        try takeNull() ? nil : raw(type)
    }

    /// Skips a value whose text is read strictly afterwards (an object or array: only its end is
    /// found here, strings and escapes taken into account) or now (anything else).
    private mutating func skipValue() throws {
        skipWhitespace()
        guard index < bytes.count else { throw NotOnTheFastPath() }
        switch bytes[index] {
        case UInt8(ascii: "\""):
            _ = try string()
        case UInt8(ascii: "t"), UInt8(ascii: "f"):
            _ = try bool()
        case UInt8(ascii: "n"):
            try literal("null")
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            var depth = 0
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    index += 1
                    while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                        index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
                    }
                    guard index < bytes.count else { throw NotOnTheFastPath() }
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 {
                        index += 1
                        return
                    }
                default:
                    break
                }
                index += 1
            }
            throw NotOnTheFastPath()
        default:
            _ = try double()
        }
    }

    /// A nested object (`error`, `hook`, `response`) or null, read by the tree path from its text.
    private mutating func nested<T: JSONValueInitializable>(_ type: T.Type) throws -> T? {
        if try takeNull() { return nil }
        skipWhitespace()
        let start = index
        try skipValue()
        let text = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
        return try T(jsonValue: try JSONParser.parse(text), codingPath: [])
    }

    // MARK: - Objects

    /// One flag a member, so that a member given twice is left to the tree path (which refuses it).
    private struct Seen {
        var bits: UInt64 = 0
        mutating func mark(_ bit: Int) throws {
            guard bits & (1 << bit) == 0 else { throw NotOnTheFastPath() }
            bits |= 1 << bit
        }
        func has(_ bit: Int) -> Bool { bits & (1 << bit) != 0 }
    }

    /// A job object (SPEC's members; the ones it leaves out are as the tree path leaves them).
    mutating func jobObject() throws -> JobSnapshot {
        var seen = Seen()
        var id: Int64 = 0
        var kind = JobKind.download
        var url = ""
        var method = ""
        var state = TransferState.queued
        var destination: String?
        var bytes: Int64 = 0
        var total: Int64?
        var fraction: Double?
        var rate = 0.0
        var eta: Double?
        var attempts = 0
        var httpStatus: Int?
        var error: TransferError?
        var waitReason: WaitReason?
        var nextRetryAt: String?
        var insecure = false
        var sha256: String?
        var createdAt = ""
        var updatedAt = ""
        var completedAt: String?
        var history: [AttemptRecord] = []
        var response: ResponseInfo?
        var uploadUrl: String?
        var resumable: ResumableProtocol?
        var hook: HookResult?
        var connections: Int?
        // The required members' flags (the ones `JobSnapshot(jsonValue:)` throws without).
        let required: [Int] = [0, 1, 2, 3, 4, 6, 9, 11, 16, 18, 19, 21]
        try members { c, name in
            switch name {
            case K.id:
                try seen.mark(0)
                id = try c.integer()
            case K.kind:
                try seen.mark(1)
                kind = try c.raw(JobKind.self)
            case K.url:
                try seen.mark(2)
                url = try c.string()
            case K.method:
                try seen.mark(3)
                method = try c.string()
            case K.state:
                try seen.mark(4)
                state = try c.raw(TransferState.self)
            case K.destination:
                try seen.mark(5)
                destination = try c.optionalString()
            case K.bytes:
                try seen.mark(6)
                bytes = try c.integer()
            case K.total:
                try seen.mark(7)
                total = try c.optionalInteger()
            case K.fraction:
                try seen.mark(8)
                fraction = try c.optionalDouble()
            case K.rate:
                try seen.mark(9)
                rate = try c.double()
            case K.eta:
                try seen.mark(10)
                eta = try c.optionalDouble()
            case K.attempts:
                try seen.mark(11)
                attempts = try c.int()
            case K.httpStatus:
                try seen.mark(12)
                httpStatus = try c.optionalInt()
            case K.error:
                try seen.mark(13)
                error = try c.nested(TransferError.self)
            case K.waitReason:
                try seen.mark(14)
                waitReason = try c.optionalRaw(WaitReason.self)
            case K.nextRetryAt:
                try seen.mark(15)
                nextRetryAt = try c.optionalString()
            case K.insecure:
                try seen.mark(16)
                insecure = try c.bool()
            case K.sha256:
                try seen.mark(17)
                sha256 = try c.optionalString()
            case K.createdAt:
                try seen.mark(18)
                createdAt = try c.string()
            case K.updatedAt:
                try seen.mark(19)
                updatedAt = try c.string()
            case K.completedAt:
                try seen.mark(20)
                completedAt = try c.optionalString()
            case K.history:
                try seen.mark(21)
                try c.expect(UInt8(ascii: "["))
                if !c.take(UInt8(ascii: "]")) {
                    repeat { history.append(try c.attemptObject()) } while c.take(UInt8(ascii: ","))
                    try c.expect(UInt8(ascii: "]"))
                }
            case K.response:
                try seen.mark(22)
                response = try c.nested(ResponseInfo.self)
            case K.uploadUrl:
                try seen.mark(23)
                uploadUrl = try c.optionalString()
            case K.resumable:
                try seen.mark(24)
                resumable = try c.optionalRaw(ResumableProtocol.self)
            case K.hook:
                try seen.mark(25)
                hook = try c.nested(HookResult.self)
            case K.connections:
                try seen.mark(26)
                connections = try c.optionalInt()
            default: throw NotOnTheFastPath()  // not a member the daemon writes: the tree's
            }
        }
        guard required.allSatisfy(seen.has) else { throw NotOnTheFastPath() }
        var job = JobSnapshot(
            id: id, kind: kind, url: url, method: method, state: state, destination: destination, bytes: bytes,
            total: total, fraction: fraction, rate: rate, eta: eta, attempts: attempts, httpStatus: httpStatus,
            error: error, waitReason: waitReason, nextRetryAt: nextRetryAt, insecure: insecure, sha256: sha256,
            createdAt: createdAt, updatedAt: updatedAt, completedAt: completedAt, history: history,
            response: response, uploadUrl: uploadUrl, resumable: resumable, hook: hook)
        job.connections = connections
        return job
    }

    /// One entry of a job's `history`.
    private mutating func attemptObject() throws -> AttemptRecord {
        var seen = Seen()
        var attempt = 0
        var startedAt = ""
        var endedAt: String?
        var httpStatus: Int?
        var bytes: Int64 = 0
        var nameLookup: Double?
        var connect: Double?
        var tls: Double?
        var firstByte: Double?
        var total: Double?
        var error: TransferError?
        try members { c, name in
            switch name {
            case K.attempt:
                try seen.mark(0)
                attempt = try c.int()
            case K.startedAt:
                try seen.mark(1)
                startedAt = try c.string()
            case K.endedAt:
                try seen.mark(2)
                endedAt = try c.optionalString()
            case K.httpStatus:
                try seen.mark(3)
                httpStatus = try c.optionalInt()
            case K.bytes:
                try seen.mark(4)
                bytes = try c.integer()
            case K.nameLookup:
                try seen.mark(5)
                nameLookup = try c.optionalDouble()
            case K.connect:
                try seen.mark(6)
                connect = try c.optionalDouble()
            case K.tls:
                try seen.mark(7)
                tls = try c.optionalDouble()
            case K.firstByte:
                try seen.mark(8)
                firstByte = try c.optionalDouble()
            case K.total:
                try seen.mark(9)
                total = try c.optionalDouble()
            case K.error:
                try seen.mark(10)
                error = try c.nested(TransferError.self)
            default: throw NotOnTheFastPath()  // not a member the daemon writes: the tree's
            }
        }
        guard seen.has(0), seen.has(1), seen.has(4) else { throw NotOnTheFastPath() }
        return AttemptRecord(
            attempt: attempt, startedAt: startedAt, endedAt: endedAt, httpStatus: httpStatus, bytes: bytes,
            nameLookup: nameLookup, connect: connect, tls: tls, firstByte: firstByte, total: total, error: error)
    }

    /// A response carrying jobs (``JobObjectReader/jobsResponse(_:id:)``).
    mutating func jobsResponse(id: Int64) throws -> [JobSnapshot?] {
        var version = false
        var answers = false
        var jobs: [JobSnapshot?]?
        try members { c, name in
            switch name {
            case K.jsonrpc:
                guard !version, try c.string() == "2.0" else { throw NotOnTheFastPath() }
                version = true
            case K.id:
                guard !answers, try c.integer() == id else { throw NotOnTheFastPath() }
                answers = true
            case K.result:
                guard jobs == nil else { throw NotOnTheFastPath() }
                try c.members { c, name in
                    guard name == K.jobs else { throw NotOnTheFastPath() }
                    guard jobs == nil else { throw NotOnTheFastPath() }
                    var list: [JobSnapshot?] = []
                    try c.expect(UInt8(ascii: "["))
                    if !c.take(UInt8(ascii: "]")) {
                        repeat {
                            list.append(try c.takeNull() ? nil : try c.jobObject())
                        } while c.take(UInt8(ascii: ","))
                        try c.expect(UInt8(ascii: "]"))
                    }
                    jobs = list
                }
                guard jobs != nil else { throw NotOnTheFastPath() }
            default:
                throw NotOnTheFastPath()  // an `error`, or anything else: the tree path's
            }
        }
        guard atEnd(), version, answers, let jobs else { throw NotOnTheFastPath() }
        return jobs
    }

    /// A notification carrying a job (``JobObjectReader/notification(_:)``).
    mutating func notification() throws -> JobObjectReader.Notification {
        var method: String?
        var params: Range<Int>?
        // Read in place when the method came first (the daemon sorts its members); else its range
        // is kept and read at the end.
        var job: JobSnapshot?
        var version = false
        try members { c, name in
            switch name {
            case K.jsonrpc:
                guard !version, try c.string() == "2.0" else { throw NotOnTheFastPath() }
                version = true
            case K.method:
                guard method == nil else { throw NotOnTheFastPath() }
                method = try c.string()
            case K.params:
                guard params == nil else { throw NotOnTheFastPath() }
                c.skipWhitespace()
                let start = c.index
                if method != nil {
                    job = try c.jobObject()
                } else {
                    try c.skipValue()
                }
                params = start..<c.index
            default:
                throw NotOnTheFastPath()  // an `id` (a response) or anything else: the tree path's
            }
        }
        guard atEnd(), version, let method, let params else { throw NotOnTheFastPath() }
        if let job { return JobObjectReader.Notification(method: method, job: job) }
        var inner = JSONByteCursor(UnsafeRawBufferPointer(rebasing: bytes[params]))
        let late = try inner.jobObject()
        guard inner.atEnd() else { throw NotOnTheFastPath() }
        return JobObjectReader.Notification(method: method, job: late)
    }
}

/// The member names read here.
private enum K {
    static let id = JSONByteCursor.Key("id")
    static let kind = JSONByteCursor.Key("kind")
    static let url = JSONByteCursor.Key("url")
    static let method = JSONByteCursor.Key("method")
    static let state = JSONByteCursor.Key("state")
    static let destination = JSONByteCursor.Key("destination")
    static let bytes = JSONByteCursor.Key("bytes")
    static let total = JSONByteCursor.Key("total")
    static let fraction = JSONByteCursor.Key("fraction")
    static let rate = JSONByteCursor.Key("rate")
    static let eta = JSONByteCursor.Key("eta")
    static let attempts = JSONByteCursor.Key("attempts")
    static let httpStatus = JSONByteCursor.Key("httpStatus")
    static let error = JSONByteCursor.Key("error")
    static let waitReason = JSONByteCursor.Key("waitReason")
    static let nextRetryAt = JSONByteCursor.Key("nextRetryAt")
    static let insecure = JSONByteCursor.Key("insecure")
    static let sha256 = JSONByteCursor.Key("sha256")
    static let createdAt = JSONByteCursor.Key("createdAt")
    static let updatedAt = JSONByteCursor.Key("updatedAt")
    static let completedAt = JSONByteCursor.Key("completedAt")
    static let history = JSONByteCursor.Key("history")
    static let response = JSONByteCursor.Key("response")
    static let uploadUrl = JSONByteCursor.Key("uploadUrl")
    static let resumable = JSONByteCursor.Key("resumable")
    static let hook = JSONByteCursor.Key("hook")
    static let connections = JSONByteCursor.Key("connections")
    static let attempt = JSONByteCursor.Key("attempt")
    static let startedAt = JSONByteCursor.Key("startedAt")
    static let endedAt = JSONByteCursor.Key("endedAt")
    static let nameLookup = JSONByteCursor.Key("nameLookup")
    static let connect = JSONByteCursor.Key("connect")
    static let tls = JSONByteCursor.Key("tls")
    static let firstByte = JSONByteCursor.Key("firstByte")
    static let jsonrpc = JSONByteCursor.Key("jsonrpc")
    static let params = JSONByteCursor.Key("params")
    static let result = JSONByteCursor.Key("result")
    static let jobs = JSONByteCursor.Key("jobs")
}
