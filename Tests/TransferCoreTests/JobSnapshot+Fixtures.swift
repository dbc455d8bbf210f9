import TransferCore

extension JobSnapshot {
    /// A job with every member set: an upload waiting to retry, with a nested `error`, `hook` and
    /// `response`, two attempts, escapes, control characters and non-ASCII text (the job-object
    /// readers' tests share it).
    static var everyMemberSet: JobSnapshot {
        var job = JobSnapshot(
            id: 9_007_199_254_740_993, kind: .upload, url: "https://example.com/ü?q=1", method: "PATCH",
            state: .waiting, destination: "/tmp/a \"b\"", bytes: 1 << 40, total: 1 << 41, fraction: 0.5,
            rate: 12.25, eta: 3, attempts: 2, httpStatus: 503,
            error: TransferError(.httpStatus, "HTTP 503", retryable: true), waitReason: .backoff,
            nextRetryAt: "2026-11-24T10:00:00.250Z", insecure: true, sha256: String(repeating: "ab", count: 32),
            createdAt: "2026-11-24T10:00:00Z", updatedAt: "2026-11-24T10:00:01Z", completedAt: nil,
            history: [
                AttemptRecord(
                    attempt: 1, startedAt: "s", endedAt: "e", httpStatus: 503, bytes: 7, nameLookup: 0.001,
                    connect: 0.002, tls: 0, firstByte: 0.5, total: 1.25,
                    error: TransferError(.httpStatus, "HTTP 503", retryable: true)),
                AttemptRecord(attempt: 2, startedAt: "s2"),
            ],
            response: ResponseInfo(status: 201, headers: ["Location": "/x", "Tus-Resumable": "1.0.0"], body: "ok\n"),
            uploadUrl: "https://example.com/up/1", resumable: .tus, hook: HookResult(exitStatus: 137, output: "é\u{1}"))
        job.connections = 3
        return job
    }
}
