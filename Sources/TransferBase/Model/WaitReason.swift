/// Why a `waiting` job waits: the job object's `waitReason` (SPEC "The job object", "Disk full").
public enum WaitReason: String, Codable, Sendable, CaseIterable {
    /// A retry timer (`nextRetryAt` says when).
    case backoff
    /// The network is unreachable; the job starts when it returns.
    case offline
    /// The file system of the destination is full; the job starts when space is free.
    case disk
}
