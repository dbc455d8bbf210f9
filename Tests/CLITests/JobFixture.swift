import TransferBase

/// Job objects for the rendering tests: a download of `url` with the fields people see, the rest
/// at their resting values.
enum JobFixture {
    /// A job object; every parameter has a plain default.
    static func job(
        id: Int64 = 1, kind: JobKind = .download, url: String = "http://example.com/files/big.iso",
        state: TransferState = .queued, destination: String? = "/data/big.iso", bytes: Int64 = 0,
        total: Int64? = nil, fraction: Double? = nil, rate: Double = 0, eta: Double? = nil,
        error: TransferError? = nil, waitReason: WaitReason? = nil, nextRetryAt: String? = nil,
        history: [AttemptRecord] = [], response: ResponseInfo? = nil
    ) -> JobSnapshot {
        JobSnapshot(
            id: id, kind: kind, url: url, method: kind == .download ? "GET" : "PUT", state: state,
            destination: destination, bytes: bytes, total: total, fraction: fraction, rate: rate, eta: eta,
            attempts: history.count, httpStatus: history.last?.httpStatus, error: error, waitReason: waitReason,
            nextRetryAt: nextRetryAt, insecure: false, sha256: nil, createdAt: "2026-11-23T20:00:00Z",
            updatedAt: "2026-11-23T20:00:05Z", completedAt: state == .completed ? "2026-11-23T20:00:05Z" : nil,
            history: history, response: response)
    }
}
