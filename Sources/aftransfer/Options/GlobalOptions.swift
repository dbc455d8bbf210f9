import ArgumentParser
import TransferBase

/// Options every command takes, after the subcommand (`aftransfer list --json --home DIR`):
/// which home and socket to use, and whether to start the daemon when none answers.
struct GlobalOptions: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "The home directory (database, socket, log). Default: $AFTRANSFER_HOME, else ${XDG_STATE_HOME:-~/.local/state}/aftransfer.",
            valueName: "dir"))
    var home: String?

    @Option(
        help: ArgumentHelp(
            "The daemon's socket. Default: $AFTRANSFER_SOCKET, else <home>/aftransferd.sock.", valueName: "path"))
    var socket: String?

    @Flag(help: "Do not start aftransferd when no daemon answers; exit 3 instead.")
    var noAutostart = false

    /// An empty `--home` or `--socket` (an unset variable in a script) is refused rather than read
    /// as absent: it would reach the default home's daemon and queue, or start one there. So is a
    /// socket path too long for a Unix socket (no daemon could listen there).
    func validate() throws {
        if home?.isEmpty == true { throw ValidationError("--home cannot be empty.") }
        if socket?.isEmpty == true { throw ValidationError("--socket cannot be empty.") }
        if let problem = paths.socketProblem { throw ValidationError(problem) }
    }

    /// The home and socket from the flags, then the environment, then the defaults.
    var paths: Paths { Paths.resolve(home: home, socket: socket) }

    /// Connects to the daemon, starting it first unless `--no-autostart` (or `autostart` is false).
    /// - Parameter autostart: false for the commands that never start a daemon.
    /// - Throws: ``CLIFailure`` with status 3 when no daemon answers and none can be started.
    func connect(autostart: Bool = true) throws -> RPCClient {
        let paths = self.paths
        do {
            return try DaemonLauncher.connect(paths: paths, autostart: autostart && !noAutostart)
        } catch let error as ClientError {
            guard case .unreachable = error else { throw error }
            let hint = autostart && noAutostart ? " (not started: --no-autostart)" : ""
            throw CLIFailure(CLIFailure.unreachable, "no daemon answers on \(paths.socket)\(hint)")
        } catch let error as DaemonLauncher.LaunchError {
            throw CLIFailure(CLIFailure.unreachable, error.message)
        }
    }
}
