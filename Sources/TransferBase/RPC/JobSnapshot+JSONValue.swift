// The job object read straight from a parsed tree (``JSONValueInitializable``): every event a
// follower receives and every job of an answer. Each reads its members as the synthesized
// `init(from:)` does (JSONValueInitializableTests compares the two on the same texts).

extension JobSnapshot: JSONValueInitializable {
    /// Reads a job object, as `init(from:)` does.
    public init(jsonValue value: JSONValue, codingPath: [CodingKey]) throws {
        let m = try JSONMembers(value, codingPath: codingPath)
        self.init(
            id: try m.integer("id"), kind: try m.raw("kind"), url: try m.string("url"), method: try m.string("method"),
            state: try m.raw("state"), destination: try m.string(ifPresent: "destination"),
            bytes: try m.integer("bytes"), total: try m.integer(ifPresent: "total"),
            fraction: try m.double(ifPresent: "fraction"), rate: try m.double("rate"),
            eta: try m.double(ifPresent: "eta"), attempts: try m.integer("attempts"),
            httpStatus: try m.integer(ifPresent: "httpStatus"), error: try m.value(ifPresent: "error"),
            waitReason: try m.raw(ifPresent: "waitReason"), nextRetryAt: try m.string(ifPresent: "nextRetryAt"),
            insecure: try m.bool("insecure"), sha256: try m.string(ifPresent: "sha256"),
            createdAt: try m.string("createdAt"), updatedAt: try m.string("updatedAt"),
            completedAt: try m.string(ifPresent: "completedAt"), history: try m.array("history"),
            response: try m.value(ifPresent: "response"), uploadUrl: try m.string(ifPresent: "uploadUrl"),
            resumable: try m.raw(ifPresent: "resumable"), hook: try m.value(ifPresent: "hook"))
        connections = try m.integer(ifPresent: "connections")
    }
}

extension AttemptRecord: JSONValueInitializable {
    /// Reads an attempt of a job's `history`, as `init(from:)` does.
    public init(jsonValue value: JSONValue, codingPath: [CodingKey]) throws {
        let m = try JSONMembers(value, codingPath: codingPath)
        self.init(
            attempt: try m.integer("attempt"), startedAt: try m.string("startedAt"),
            endedAt: try m.string(ifPresent: "endedAt"), httpStatus: try m.integer(ifPresent: "httpStatus"),
            bytes: try m.integer("bytes"), nameLookup: try m.double(ifPresent: "nameLookup"),
            connect: try m.double(ifPresent: "connect"), tls: try m.double(ifPresent: "tls"),
            firstByte: try m.double(ifPresent: "firstByte"), total: try m.double(ifPresent: "total"),
            error: try m.value(ifPresent: "error"))
    }
}

extension TransferError: JSONValueInitializable {
    /// Reads a job's or an attempt's `error`, as `init(from:)` does.
    public init(jsonValue value: JSONValue, codingPath: [CodingKey]) throws {
        let m = try JSONMembers(value, codingPath: codingPath)
        self.init(try m.raw("code"), try m.string("message"), retryable: try m.bool("retryable"))
    }
}

extension HookResult: JSONValueInitializable {
    /// Reads a job's `hook`, as `init(from:)` does.
    public init(jsonValue value: JSONValue, codingPath: [CodingKey]) throws {
        let m = try JSONMembers(value, codingPath: codingPath)
        self.init(exitStatus: try m.integer("exitStatus"), output: try m.string("output"))
    }
}

extension ResponseInfo: JSONValueInitializable {
    /// Reads an upload's `response`, as `init(from:)` does.
    public init(jsonValue value: JSONValue, codingPath: [CodingKey]) throws {
        let m = try JSONMembers(value, codingPath: codingPath)
        self.init(status: try m.integer("status"), headers: try m.strings("headers"), body: try m.string("body"))
    }
}
