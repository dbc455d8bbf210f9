import TransferBase

// The library knows nothing about exit codes: the CLI maps its errors to the statuses of SPEC
// "Exit status" and of docs/rpc.md's error table here, in one place.

extension RPCError {
    /// The CLI's exit status for this daemon error (`docs/rpc.md`, table "Errors"): 2 for refused
    /// input, unknown ids, and inapplicable commands; 3 when the daemon is shutting down; 1 for an
    /// internal error or a code this client does not know.
    var exitStatus: Int32 {
        switch code {
        case RPCErrorCode.parseError, RPCErrorCode.invalidRequest, RPCErrorCode.methodNotFound,
            RPCErrorCode.invalidParams, RPCErrorCode.notFound, RPCErrorCode.refused, RPCErrorCode.tooLarge:
            return CLIFailure.usage
        case RPCErrorCode.shuttingDown:
            return CLIFailure.unreachable
        default:
            return CLIFailure.jobFailed
        }
    }
}

extension ClientError {
    /// The CLI's exit status for this error: 3, the daemon could not be reached (SPEC "Exit status").
    var exitStatus: Int32 { CLIFailure.unreachable }
}

extension DaemonLauncher.LaunchError {
    /// The CLI's exit status: 3, the daemon could not be started.
    var exitStatus: Int32 { CLIFailure.unreachable }
}
