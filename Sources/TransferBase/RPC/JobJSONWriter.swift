/// Writes job objects (``JobSnapshot`` and its nested types) as JSON, byte for byte as
/// `JSONEncoder` with `[.sortedKeys, .withoutEscapingSlashes]` does, at a fraction of its cost:
/// `transfer.list` of 100,000 jobs is written this way. Keys are in sorted order; absent values are
/// `null`, as ``JobSnapshot/encode(to:)`` says. A field added to the job object must be added here
/// too (`JobJSONWriterTests` compares both for many snapshots).
public struct JobJSONWriter {
    /// The bytes written so far.
    public var bytes: [UInt8] = []

    /// Creates an empty writer; `capacity` bytes are reserved.
    public init(capacity: Int = 0) { bytes.reserveCapacity(capacity) }

    // MARK: - The job object

    /// Appends one job object.
    public mutating func write(_ job: JobSnapshot) {
        key("{\"attempts\":")
        int(Int64(job.attempts))
        key(",\"bytes\":")
        int(job.bytes)
        key(",\"completedAt\":")
        string(job.completedAt)
        key(",\"connections\":")
        int(Int64(job.connections ?? 0))
        key(",\"createdAt\":")
        string(job.createdAt)
        key(",\"destination\":")
        string(job.destination)
        key(",\"error\":")
        write(job.error)
        key(",\"eta\":")
        double(job.eta)
        key(",\"fraction\":")
        double(job.fraction)
        key(",\"history\":[")
        for (n, attempt) in job.history.enumerated() {
            if n > 0 { bytes.append(UInt8(ascii: ",")) }
            write(attempt)
        }
        key("],\"hook\":")
        if let hook = job.hook {
            key("{\"exitStatus\":")
            int(Int64(hook.exitStatus))
            key(",\"output\":")
            string(hook.output)
            key("}")
        } else {
            null()
        }
        key(",\"httpStatus\":")
        int(job.httpStatus.map(Int64.init))
        key(",\"id\":")
        int(job.id)
        key(",\"insecure\":")
        bool(job.insecure)
        key(",\"kind\":")
        string(job.kind.rawValue)
        key(",\"method\":")
        string(job.method)
        key(",\"nextRetryAt\":")
        string(job.nextRetryAt)
        key(",\"rate\":")
        double(job.rate)
        if job.kind == .upload {
            key(",\"response\":")
            if let response = job.response { write(response) } else { null() }
            key(",\"resumable\":")
            string(job.resumable?.rawValue)
        }
        key(",\"sha256\":")
        string(job.sha256)
        key(",\"state\":")
        string(job.state.rawValue)
        key(",\"total\":")
        int(job.total)
        key(",\"updatedAt\":")
        string(job.updatedAt)
        if job.kind == .upload {
            key(",\"uploadUrl\":")
            string(job.uploadUrl)
        }
        key(",\"url\":")
        string(job.url)
        key(",\"waitReason\":")
        string(job.waitReason?.rawValue)
        bytes.append(UInt8(ascii: "}"))
    }

    /// Appends one attempt of a job's `history`.
    public mutating func write(_ attempt: AttemptRecord) {
        key("{\"attempt\":")
        int(Int64(attempt.attempt))
        key(",\"bytes\":")
        int(attempt.bytes)
        key(",\"connect\":")
        double(attempt.connect)
        key(",\"endedAt\":")
        string(attempt.endedAt)
        key(",\"error\":")
        write(attempt.error)
        key(",\"firstByte\":")
        double(attempt.firstByte)
        key(",\"httpStatus\":")
        int(attempt.httpStatus.map(Int64.init))
        key(",\"nameLookup\":")
        double(attempt.nameLookup)
        key(",\"startedAt\":")
        string(attempt.startedAt)
        key(",\"tls\":")
        double(attempt.tls)
        key(",\"total\":")
        double(attempt.total)
        bytes.append(UInt8(ascii: "}"))
    }

    /// Appends an error object, or `null`.
    public mutating func write(_ error: TransferError?) {
        guard let error else { return null() }
        key("{\"code\":")
        string(error.code.rawValue)
        key(",\"message\":")
        string(error.message)
        key(",\"retryable\":")
        bool(error.retryable)
        bytes.append(UInt8(ascii: "}"))
    }

    /// Appends an upload's response object.
    public mutating func write(_ response: ResponseInfo) {
        key("{\"body\":")
        string(response.body)
        key(",\"headers\":{")
        for (n, name) in response.headers.keys.sorted().enumerated() {
            if n > 0 { bytes.append(UInt8(ascii: ",")) }
            string(name)
            bytes.append(UInt8(ascii: ":"))
            string(response.headers[name])
        }
        key("},\"status\":")
        int(Int64(response.status))
        bytes.append(UInt8(ascii: "}"))
    }

    // MARK: - Values

    /// Appends ASCII text as it is (keys and punctuation).
    public mutating func key(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    /// Appends bytes that already are JSON.
    public mutating func raw<C: Collection>(_ json: C) where C.Element == UInt8 {
        bytes.append(contentsOf: json)
    }

    /// Appends `null`.
    public mutating func null() { key("null") }

    /// Appends `true` or `false`.
    public mutating func bool(_ value: Bool) { value ? key("true") : key("false") }

    /// Appends an integer, or `null`.
    public mutating func int(_ value: Int64?) {
        guard let value else { return null() }
        if value >= 0 && value < 10 {
            bytes.append(UInt8(ascii: "0") &+ UInt8(value))
            return
        }
        // Digits from the end, in a small stack buffer (Int64.min has 20 characters).
        withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { buf in
            var n = value.magnitude
            var i = 20
            repeat {
                i -= 1
                buf[i] = UInt8(ascii: "0") &+ UInt8(n % 10)
                n /= 10
            } while n > 0
            if value < 0 {
                i -= 1
                buf[i] = UInt8(ascii: "-")
            }
            bytes.append(contentsOf: UnsafeBufferPointer(rebasing: buf[i..<20]))
        }
    }

    /// Appends a number as `JSONEncoder` writes it (shortest round-trip digits, no `.0` on whole
    /// numbers), or `null`; a value JSON cannot hold (NaN, infinity) is written as `null`.
    public mutating func double(_ value: Double?) {
        guard let value, value.isFinite else { return null() }
        if value == value.rounded(), abs(value) < 1e9 {
            // Whole numbers print as integers; -0.0 as "-0".
            if value == 0 && value.sign == .minus { return key("-0") }
            return int(Int64(value))
        }
        var text = value.description
        if text.hasSuffix(".0") { text.removeLast(2) }
        bytes.append(contentsOf: text.utf8)
    }

    /// Appends a string with JSON escapes (`"`, `\`, and control characters below U+0020;
    /// `/` and everything else as it is), or `null`.
    public mutating func string(_ value: String?) {
        guard var value else { return null() }
        bytes.append(UInt8(ascii: "\""))
        value.withUTF8 { utf8 in
            var runStart = 0
            for i in 0..<utf8.count {
                let b = utf8[i]
                guard b < 0x20 || b == UInt8(ascii: "\"") || b == UInt8(ascii: "\\") else { continue }
                if runStart < i { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart..<i])) }
                runStart = i + 1
                bytes.append(UInt8(ascii: "\\"))
                switch b {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(b)
                case 0x08: bytes.append(UInt8(ascii: "b"))
                case 0x09: bytes.append(UInt8(ascii: "t"))
                case 0x0A: bytes.append(UInt8(ascii: "n"))
                case 0x0C: bytes.append(UInt8(ascii: "f"))
                case 0x0D: bytes.append(UInt8(ascii: "r"))
                default:
                    let hex: [UInt8] = Array("0123456789abcdef".utf8)
                    bytes.append(contentsOf: [
                        UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"), hex[Int(b >> 4)], hex[Int(b & 0xF)],
                    ])
                }
            }
            if runStart < utf8.count { bytes.append(contentsOf: UnsafeBufferPointer(rebasing: utf8[runStart...])) }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// Appends a JSON-RPC id: a number, a string or `null`.
    public mutating func id(_ id: JSONValue) {
        switch id {
        case .int(let n): int(n)
        case .double(let d): double(d)
        case .string(let s): string(s)
        default: null()
        }
    }
}
