/// What a job's `--on-end` hook left (SPEC "Living with it"): the job object's `"hook"`.
public struct HookResult: Codable, Sendable, Equatable {
    /// The hook's exit status (128 + the signal when a signal ended it, as a shell reports it).
    public var exitStatus: Int
    /// The first 4 KiB of its stdout and stderr together, as UTF-8 (invalid bytes replaced).
    public var output: String

    /// Creates a hook result.
    public init(exitStatus: Int, output: String) {
        self.exitStatus = exitStatus
        self.output = output
    }
}

/// Which hook of a job's ending is still to run, stored with the job (`hookPending`) in the same
/// transaction as the ending, so that a crash never loses or repeats a finished hook.
public enum HookStage: Int, Codable, Sendable, Equatable {
    /// The job's own `--on-end` runs next (then the daemon's).
    case job = 1
    /// The daemon's `--on-end` runs next.
    case daemon = 2
}
