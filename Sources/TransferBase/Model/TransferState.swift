/// The life-cycle state of a job (SPEC "States").
public enum TransferState: String, Codable, Sendable, CaseIterable {
    /// Waits for a free transfer slot.
    case queued
    /// Transfers bytes now.
    case running
    /// Failed an attempt and will retry, on a timer or when the network returns.
    case waiting
    /// Stopped by the user; partial data is kept.
    case paused
    /// Ended well; the file is in place.
    case completed
    /// Ended badly (not retryable, or retries used up); partial data is kept for `retry`.
    case failed
    /// Ended by the user; partial data removed.
    case cancelled

    /// Whether the job has ended (no transfer will start without a user's `retry`).
    public var isFinal: Bool {
        switch self {
        case .completed, .failed, .cancelled: return true
        case .queued, .running, .waiting, .paused: return false
        }
    }

    /// The one place that says which transitions are legal.
    public func canTransition(to next: TransferState) -> Bool {
        switch (self, next) {
        case (.queued, .running), (.queued, .paused), (.queued, .cancelled), (.queued, .failed):
            return true
        case (.running, .completed), (.running, .failed), (.running, .waiting), (.running, .paused),
            (.running, .cancelled), (.running, .queued):
            return true
        case (.waiting, .running), (.waiting, .queued), (.waiting, .paused), (.waiting, .cancelled),
            (.waiting, .failed):
            return true
        case (.paused, .queued), (.paused, .cancelled):
            return true
        case (.failed, .queued), (.cancelled, .queued):
            return true
        default:
            return false
        }
    }
}
