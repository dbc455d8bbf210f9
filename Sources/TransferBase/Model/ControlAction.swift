/// A control command on jobs (SPEC "Control commands"): what `pause`, `resume`, `cancel`, `retry`
/// and `remove` ask of the engine.
public enum ControlAction: String, CaseIterable, Sendable {
    /// Stops a queued, running or waiting job; its data is kept.
    case pause
    /// Queues a paused job again.
    case resume
    /// Ends a job that has not ended; its partial data is removed.
    case cancel
    /// Queues a failed or cancelled job again (a failed download resumes from its part).
    case retry
    /// Forgets a job (a running one is cancelled first).
    case remove

    /// The RPC method that asks for this action.
    public var method: RPCMethod {
        switch self {
        case .pause: return .transferPause
        case .resume: return .transferResume
        case .cancel: return .transferCancel
        case .retry: return .transferRetry
        case .remove: return .transferRemove
        }
    }
}
