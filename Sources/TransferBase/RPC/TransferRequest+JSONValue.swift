// A request read straight from a parsed tree and written straight as JSON: `transfer.addMany`
// reads every request of a list this way, and the store writes every new job's `request` column
// (TransferRequestCodingTests compares both with `Codable`'s results).

extension TransferRequest: JSONValueInitializable {
    /// Reads `transfer.add`'s params, as `init(from:)` does: `limitRate` may be a number.
    public init(jsonValue value: JSONValue, codingPath: [CodingKey]) throws {
        let m = try JSONMembers(value, codingPath: codingPath)
        self.init(url: try m.string("url"))
        kind = try m.string(ifPresent: "kind")
        method = try m.string(ifPresent: "method")
        destination = try m.string(ifPresent: "destination")
        directory = try m.string(ifPresent: "directory")
        createDirs = try m.bool(ifPresent: "createDirs")
        replace = try m.bool(ifPresent: "replace")
        headers = try m.strings(ifPresent: "headers")
        user = try m.string(ifPresent: "user")
        sha256 = try m.string(ifPresent: "sha256")
        priority = try m.integer(ifPresent: "priority")
        if let bytes = try? m.integer(ifPresent: "limitRate", as: Int64.self) {
            limitRate = String(bytes)
        } else {
            limitRate = try m.string(ifPresent: "limitRate")
        }
        retries = try m.integer(ifPresent: "retries")
        source = try m.string(ifPresent: "source")
        form = try m.strings(ifPresent: "form")
        response = try m.string(ifPresent: "response")
        cacert = try m.string(ifPresent: "cacert")
        pinPubkey = try m.string(ifPresent: "pinPubkey")
        pinCert = try m.string(ifPresent: "pinCert")
        insecure = try m.bool(ifPresent: "insecure")
        resumable = try m.string(ifPresent: "resumable")
        onEnd = try m.string(ifPresent: "onEnd")
        connections = try m.integer(ifPresent: "connections")
    }
}

extension JobJSONWriter {
    /// Appends a request as `JSONEncoder` with sorted keys writes it: the members that are set,
    /// in sorted order (the store's `request` column).
    public mutating func write(_ request: TransferRequest) {
        var first = true
        func name(_ key: StaticString) {
            bytes.append(UInt8(ascii: first ? "{" : ","))
            first = false
            self.key(key)
        }
        if let v = request.cacert {
            name("\"cacert\":")
            string(v)
        }
        if let v = request.connections {
            name("\"connections\":")
            int(Int64(v))
        }
        if let v = request.createDirs {
            name("\"createDirs\":")
            bool(v)
        }
        if let v = request.destination {
            name("\"destination\":")
            string(v)
        }
        if let v = request.directory {
            name("\"directory\":")
            string(v)
        }
        if let v = request.form {
            name("\"form\":")
            strings(v)
        }
        if let v = request.headers {
            name("\"headers\":")
            strings(v)
        }
        if let v = request.insecure {
            name("\"insecure\":")
            bool(v)
        }
        if let v = request.kind {
            name("\"kind\":")
            string(v)
        }
        if let v = request.limitRate {
            name("\"limitRate\":")
            string(v)
        }
        if let v = request.method {
            name("\"method\":")
            string(v)
        }
        if let v = request.onEnd {
            name("\"onEnd\":")
            string(v)
        }
        if let v = request.pinCert {
            name("\"pinCert\":")
            string(v)
        }
        if let v = request.pinPubkey {
            name("\"pinPubkey\":")
            string(v)
        }
        if let v = request.priority {
            name("\"priority\":")
            int(Int64(v))
        }
        if let v = request.replace {
            name("\"replace\":")
            bool(v)
        }
        if let v = request.response {
            name("\"response\":")
            string(v)
        }
        if let v = request.resumable {
            name("\"resumable\":")
            string(v)
        }
        if let v = request.retries {
            name("\"retries\":")
            int(Int64(v))
        }
        if let v = request.sha256 {
            name("\"sha256\":")
            string(v)
        }
        if let v = request.source {
            name("\"source\":")
            string(v)
        }
        name("\"url\":")
        string(request.url)
        if let v = request.user {
            name("\"user\":")
            string(v)
        }
        bytes.append(UInt8(ascii: "}"))
    }

    /// Appends an array of strings.
    private mutating func strings(_ values: [String]) {
        bytes.append(UInt8(ascii: "["))
        for (n, v) in values.enumerated() {
            if n > 0 { bytes.append(UInt8(ascii: ",")) }
            string(v)
        }
        bytes.append(UInt8(ascii: "]"))
    }
}
