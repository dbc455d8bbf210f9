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
/// A daemon that adds a member to the job object sends every job through both (slower than the
/// tree alone) until this reader learns the member.
enum JobObjectReader {
    /// The event of a job notification line (`{"jsonrpc":"2.0","method":M,"params":{job}}`, members
    /// in any order) whose job this reader can read; nil for anything else (a response, a
    /// notification without a job, text the tree path must read).
    static func notification(_ line: UnsafeRawBufferPointer) -> RPCEvent? {
        var cursor = JSONByteCursor(line)
        return try? cursor.notification()
    }

    /// The jobs of a response line to request `id` whose result is `{"jobs": [job or null, …]}`
    /// (nil for each `null`); nil for anything else (another response, an error, a result with
    /// other members, text the tree path must read).
    static func jobsResponse(_ line: UnsafeRawBufferPointer, id: Int64) -> [JobSnapshot?]? {
        var cursor = JSONByteCursor(line)
        return try? cursor.jobsResponse(id: id)
    }
}

extension JSONByteCursor {
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
        // The required members' flags (the ones `JobSnapshot(jsonValue:)` throws without): id, kind,
        // url, method, state, bytes, rate, attempts, insecure, createdAt, updatedAt, history.
        let required: UInt64 = 0x2D0A5F
        try members { c, name in
            switch name {
            case JobMemberName.id:
                try seen.mark(0)
                id = try c.integer()
            case JobMemberName.kind:
                try seen.mark(1)
                kind = try c.raw(JobKind.self)
            case JobMemberName.url:
                try seen.mark(2)
                url = try c.string()
            case JobMemberName.method:
                try seen.mark(3)
                method = try c.string()
            case JobMemberName.state:
                try seen.mark(4)
                state = try c.raw(TransferState.self)
            case JobMemberName.destination:
                try seen.mark(5)
                destination = try c.optionalString()
            case JobMemberName.bytes:
                try seen.mark(6)
                bytes = try c.integer()
            case JobMemberName.total:
                try seen.mark(7)
                total = try c.optionalInteger()
            case JobMemberName.fraction:
                try seen.mark(8)
                fraction = try c.optionalDouble()
            case JobMemberName.rate:
                try seen.mark(9)
                rate = try c.double()
            case JobMemberName.eta:
                try seen.mark(10)
                eta = try c.optionalDouble()
            case JobMemberName.attempts:
                try seen.mark(11)
                attempts = try c.int()
            case JobMemberName.httpStatus:
                try seen.mark(12)
                httpStatus = try c.optionalInt()
            case JobMemberName.error:
                try seen.mark(13)
                error = try c.nested(TransferError.self)
            case JobMemberName.waitReason:
                try seen.mark(14)
                waitReason = try c.optionalRaw(WaitReason.self)
            case JobMemberName.nextRetryAt:
                try seen.mark(15)
                nextRetryAt = try c.optionalString()
            case JobMemberName.insecure:
                try seen.mark(16)
                insecure = try c.bool()
            case JobMemberName.sha256:
                try seen.mark(17)
                sha256 = try c.optionalString()
            case JobMemberName.createdAt:
                try seen.mark(18)
                createdAt = try c.string()
            case JobMemberName.updatedAt:
                try seen.mark(19)
                updatedAt = try c.string()
            case JobMemberName.completedAt:
                try seen.mark(20)
                completedAt = try c.optionalString()
            case JobMemberName.history:
                try seen.mark(21)
                try c.expect(UInt8(ascii: "["))
                if !c.take(UInt8(ascii: "]")) {
                    repeat { history.append(try c.attemptObject()) } while c.take(UInt8(ascii: ","))
                    try c.expect(UInt8(ascii: "]"))
                }
            case JobMemberName.response:
                try seen.mark(22)
                response = try c.nested(ResponseInfo.self)
            case JobMemberName.uploadUrl:
                try seen.mark(23)
                uploadUrl = try c.optionalString()
            case JobMemberName.resumable:
                try seen.mark(24)
                resumable = try c.optionalRaw(ResumableProtocol.self)
            case JobMemberName.hook:
                try seen.mark(25)
                hook = try c.nested(HookResult.self)
            case JobMemberName.connections:
                try seen.mark(26)
                connections = try c.optionalInt()
            default: throw NotOnTheFastPath()  // not a member the daemon writes: the tree's
            }
        }
        guard seen.bits & required == required else { throw NotOnTheFastPath() }
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
            case JobMemberName.attempt:
                try seen.mark(0)
                attempt = try c.int()
            case JobMemberName.startedAt:
                try seen.mark(1)
                startedAt = try c.string()
            case JobMemberName.endedAt:
                try seen.mark(2)
                endedAt = try c.optionalString()
            case JobMemberName.httpStatus:
                try seen.mark(3)
                httpStatus = try c.optionalInt()
            case JobMemberName.bytes:
                try seen.mark(4)
                bytes = try c.integer()
            case JobMemberName.nameLookup:
                try seen.mark(5)
                nameLookup = try c.optionalDouble()
            case JobMemberName.connect:
                try seen.mark(6)
                connect = try c.optionalDouble()
            case JobMemberName.tls:
                try seen.mark(7)
                tls = try c.optionalDouble()
            case JobMemberName.firstByte:
                try seen.mark(8)
                firstByte = try c.optionalDouble()
            case JobMemberName.total:
                try seen.mark(9)
                total = try c.optionalDouble()
            case JobMemberName.error:
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
            case JobMemberName.jsonrpc:
                guard !version, try c.string() == "2.0" else { throw NotOnTheFastPath() }
                version = true
            case JobMemberName.id:
                guard !answers, try c.integer() == id else { throw NotOnTheFastPath() }
                answers = true
            case JobMemberName.result:
                guard jobs == nil else { throw NotOnTheFastPath() }
                try c.members { c, name in
                    guard name == JobMemberName.jobs else { throw NotOnTheFastPath() }
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
    mutating func notification() throws -> RPCEvent {
        var method: String?
        var job: JobSnapshot?
        var version = false
        try members { c, name in
            switch name {
            case JobMemberName.jsonrpc:
                guard !version, try c.string() == "2.0" else { throw NotOnTheFastPath() }
                version = true
            case JobMemberName.method:
                guard method == nil else { throw NotOnTheFastPath() }
                method = try c.string()
            case JobMemberName.params:
                guard job == nil else { throw NotOnTheFastPath() }
                // A method read first (the daemon sorts its members) that carries no job: the
                // tree path's, without reading its params as one.
                if let method, RPCEvent.carrying(method: method) == nil { throw NotOnTheFastPath() }
                job = try c.jobObject()  // params that are no job: the tree path's
            default:
                throw NotOnTheFastPath()  // an `id` (a response) or anything else: the tree path's
            }
        }
        guard atEnd(), version, let method, let job, let makeEvent = RPCEvent.carrying(method: method) else {
            throw NotOnTheFastPath()
        }
        return makeEvent(job)
    }
}

/// The member names read here, packed as ``JSONByteCursor/Key`` packs a name: literals, so that
/// no `swift_once` guards each comparison (JobObjectReaderTests checks each against its name).
enum JobMemberName {
    static let id = JSONByteCursor.Key(low: 0x0000000000006469, high: 0x0000000000000000)  // "id"
    static let kind = JSONByteCursor.Key(low: 0x00000000646E696B, high: 0x0000000000000000)  // "kind"
    static let url = JSONByteCursor.Key(low: 0x00000000006C7275, high: 0x0000000000000000)  // "url"
    static let method = JSONByteCursor.Key(low: 0x0000646F6874656D, high: 0x0000000000000000)  // "method"
    static let state = JSONByteCursor.Key(low: 0x0000006574617473, high: 0x0000000000000000)  // "state"
    static let destination = JSONByteCursor.Key(low: 0x74616E6974736564, high: 0x00000000006E6F69)  // "destination"
    static let bytes = JSONByteCursor.Key(low: 0x0000007365747962, high: 0x0000000000000000)  // "bytes"
    static let total = JSONByteCursor.Key(low: 0x0000006C61746F74, high: 0x0000000000000000)  // "total"
    static let fraction = JSONByteCursor.Key(low: 0x6E6F697463617266, high: 0x0000000000000000)  // "fraction"
    static let rate = JSONByteCursor.Key(low: 0x0000000065746172, high: 0x0000000000000000)  // "rate"
    static let eta = JSONByteCursor.Key(low: 0x0000000000617465, high: 0x0000000000000000)  // "eta"
    static let attempts = JSONByteCursor.Key(low: 0x7374706D65747461, high: 0x0000000000000000)  // "attempts"
    static let httpStatus = JSONByteCursor.Key(low: 0x7461745370747468, high: 0x0000000000007375)  // "httpStatus"
    static let error = JSONByteCursor.Key(low: 0x000000726F727265, high: 0x0000000000000000)  // "error"
    static let waitReason = JSONByteCursor.Key(low: 0x7361655274696177, high: 0x0000000000006E6F)  // "waitReason"
    static let nextRetryAt = JSONByteCursor.Key(low: 0x727465527478656E, high: 0x0000000000744179)  // "nextRetryAt"
    static let insecure = JSONByteCursor.Key(low: 0x6572756365736E69, high: 0x0000000000000000)  // "insecure"
    static let sha256 = JSONByteCursor.Key(low: 0x0000363532616873, high: 0x0000000000000000)  // "sha256"
    static let createdAt = JSONByteCursor.Key(low: 0x4164657461657263, high: 0x0000000000000074)  // "createdAt"
    static let updatedAt = JSONByteCursor.Key(low: 0x4164657461647075, high: 0x0000000000000074)  // "updatedAt"
    static let completedAt = JSONByteCursor.Key(low: 0x6574656C706D6F63, high: 0x0000000000744164)  // "completedAt"
    static let history = JSONByteCursor.Key(low: 0x0079726F74736968, high: 0x0000000000000000)  // "history"
    static let response = JSONByteCursor.Key(low: 0x65736E6F70736572, high: 0x0000000000000000)  // "response"
    static let uploadUrl = JSONByteCursor.Key(low: 0x725564616F6C7075, high: 0x000000000000006C)  // "uploadUrl"
    static let resumable = JSONByteCursor.Key(low: 0x6C62616D75736572, high: 0x0000000000000065)  // "resumable"
    static let hook = JSONByteCursor.Key(low: 0x000000006B6F6F68, high: 0x0000000000000000)  // "hook"
    static let connections = JSONByteCursor.Key(low: 0x697463656E6E6F63, high: 0x0000000000736E6F)  // "connections"
    static let attempt = JSONByteCursor.Key(low: 0x0074706D65747461, high: 0x0000000000000000)  // "attempt"
    static let startedAt = JSONByteCursor.Key(low: 0x4164657472617473, high: 0x0000000000000074)  // "startedAt"
    static let endedAt = JSONByteCursor.Key(low: 0x0074416465646E65, high: 0x0000000000000000)  // "endedAt"
    static let nameLookup = JSONByteCursor.Key(low: 0x6B6F6F4C656D616E, high: 0x0000000000007075)  // "nameLookup"
    static let connect = JSONByteCursor.Key(low: 0x007463656E6E6F63, high: 0x0000000000000000)  // "connect"
    static let tls = JSONByteCursor.Key(low: 0x0000000000736C74, high: 0x0000000000000000)  // "tls"
    static let firstByte = JSONByteCursor.Key(low: 0x7479427473726966, high: 0x0000000000000065)  // "firstByte"
    static let jsonrpc = JSONByteCursor.Key(low: 0x006370726E6F736A, high: 0x0000000000000000)  // "jsonrpc"
    static let params = JSONByteCursor.Key(low: 0x0000736D61726170, high: 0x0000000000000000)  // "params"
    static let result = JSONByteCursor.Key(low: 0x0000746C75736572, high: 0x0000000000000000)  // "result"
    static let jobs = JSONByteCursor.Key(low: 0x0000000073626F6A, high: 0x0000000000000000)  // "jobs"

}
