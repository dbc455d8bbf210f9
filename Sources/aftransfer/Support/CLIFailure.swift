/// An error the CLI ends with: a message for stderr (if any) and the exit status.
struct CLIFailure: Error {
    /// Exit status 1: a job failed or was cancelled.
    static let jobFailed: Int32 = 1
    /// Exit status 2: bad usage, or input that was refused.
    static let usage: Int32 = 2
    /// Exit status 3: the daemon could not be reached or started.
    static let unreachable: Int32 = 3
    /// Exit status 124: `wait --timeout` ran out.
    static let timedOut: Int32 = 124
    /// Exit status 23: the output could not be written (a full disk, a closed stdout), as curl's
    /// write error; the command's work was done (a job queued), its output is lost.
    static let outputLost: Int32 = 23

    /// The exit status.
    var status: Int32
    /// Printed on stderr after `aftransfer: `, or nothing when nil.
    var message: String?

    /// Creates a failure.
    /// - Parameters:
    ///   - status: the exit status.
    ///   - message: the message for stderr, nil for none.
    init(_ status: Int32, _ message: String? = nil) {
        self.status = status
        self.message = message
    }

    /// Bad usage or refused input (exit 2).
    static func usage(_ message: String) -> CLIFailure { CLIFailure(usage, message) }
}
