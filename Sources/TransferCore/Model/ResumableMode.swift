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
