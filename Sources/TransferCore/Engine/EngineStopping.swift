/// The error a request waiting in the engine gets when the daemon stops before it could be
/// decided (a control command waiting for a job whose file was being put in place). The RPC
/// layer answers it as the daemon shutting down (-32004).
public struct EngineStopping: Error, Sendable {
    /// The error.
    public init() {}
}
