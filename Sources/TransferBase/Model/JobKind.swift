/// What a job does: the job object's `kind` (SPEC "The job object").
public enum JobKind: String, Codable, Sendable, CaseIterable {
    /// Fetches a URL into a file (`aftransfer download`).
    case download
    /// Sends a file or a multipart form (`aftransfer upload`).
    case upload
}
