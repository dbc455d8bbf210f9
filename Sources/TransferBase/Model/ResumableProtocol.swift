/// The resumable protocol a server agreed to for an upload (the job object's `resumable`).
public enum ResumableProtocol: String, Codable, Sendable {
    /// draft-ietf-httpbis-resumable-upload, interop version 8.
    case ietf
    /// tus 1.0.0.
    case tus
}
