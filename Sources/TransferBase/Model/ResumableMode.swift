/// What an upload asks for (`--resumable`, RPC param `resumable`; SPEC "Resumable uploads").
public enum ResumableMode: String, Codable, Sendable, CaseIterable {
    /// The IETF draft "Resumable Uploads for HTTP" (interop version 8) when the server offers it
    /// (a `104` with a `Location`), else a plain upload. The default.
    case auto
    /// tus 1.0.0, core and creation.
    case tus
    /// A plain upload with none of the resumable headers.
    case off

    /// The mode when none is given.
    public static let defaultMode = ResumableMode.auto
}

extension TransferRequest {
    /// The resumable protocol an upload asks for: `resumable` as validated, the default when
    /// absent, and `off` for a form upload (a form is always sent plain).
    public var resumableMode: ResumableMode {
        source == nil ? .off : ResumableMode(rawValue: resumable ?? "") ?? .defaultMode
    }
}
