import ArgumentParser
import Foundation
import TransferCore

/// `aftransferd`: the aftransfer daemon.
@main
struct AFTransferDaemon: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aftransferd",
        abstract: "The aftransfer daemon: runs queued transfers in the background.",
        discussion: """
            Under systemd socket activation (LISTEN_FDS and LISTEN_PID naming this process) it serves \
            the listening socket passed as fd 3 instead of binding its own, and tells systemd when it \
            is ready (NOTIFY_SOCKET).
            """,
        version: AFTransferVersion.string)

    @Option(name: .long, help: "Home directory (database, socket, lock, log).")
    var home: String?

    @Option(name: .long, help: "Unix socket path.")
    var socket: String?

    @Option(name: .long, help: "Most transfers at once.")
    var maxActive: Int = EngineConfig.defaultMaxActive

    @Option(name: .long, help: "Seconds under 1 byte/s that end an attempt as a timeout.")
    var stallTimeout: Double = EngineConfig.defaultStallTimeout

    @Option(name: .long, help: "Seconds between checkpoints while bytes flow.")
    var checkpointInterval: Double = EngineConfig.defaultCheckpointInterval

    @Option(name: .long, help: "Most TCP connections to one host and port, all jobs together, idle ones included.")
    var maxPerHost: Int = EngineConfig.defaultMaxPerHost

    @Option(name: .long, help: "Connections a download uses when it names none (1...16).")
    var connections: Int = EngineConfig.defaultConnections

    @Flag(name: .long, help: "Do not watch netlink for reachability.")
    var noNetworkMonitor = false

    @Option(
        name: .long,
        help: ArgumentHelp(
            "Run this shell command when any job ends (after the job's own --on-end): the job as JSON on stdin, "
                + "AFTRANSFER_JOB_ID, AFTRANSFER_STATE and AFTRANSFER_DESTINATION in its environment.",
            valueName: "cmd"))
    var onEnd: String?

    /// Parses the options and runs; bad usage exits 2 with the message and the usage, as the CLI
    /// does (argument-parser's default would be 64).
    static func main() {
        // From the first line: a stop signal during the start is kept for the daemon (``SignalHold``).
        SignalHold.catchStopSignals()
        do {
            var command = try parseAsRoot()
            try command.run()
        } catch {
            if exitCode(for: error) == .validationFailure {
                FileHandle.standardError.write(Data((fullMessage(for: error) + "\n").utf8))
                Foundation.exit(2)
            }
            exit(withError: error)
        }
    }

    func validate() throws {
        if let i = Paths.firstArgumentNotUTF8() {
            throw ValidationError("argument \(i) is not valid UTF-8 (paths and options must be UTF-8)")
        }
        // As the CLI: an unset variable in a script must not reach (or start on) the default home.
        if home?.isEmpty == true { throw ValidationError("--home cannot be empty.") }
        if socket?.isEmpty == true { throw ValidationError("--socket cannot be empty.") }
        // Before the home's files are made: a path too long for `sun_path` cannot be bound.
        if let problem = Paths.resolve(home: home, socket: socket).socketProblem { throw ValidationError(problem) }
        if let onEnd {
            // As the CLI's --on-end (RequestValidator): a command that says nothing is a mistake.
            if onEnd.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty {
                throw ValidationError("--on-end cannot be empty.")
            }
            if onEnd.unicodeScalars.contains("\0") || onEnd.utf8.count > RequestValidator.maxOnEndBytes {
                throw ValidationError(
                    "--on-end contains NUL or is longer than \(RequestValidator.maxOnEndBytes) bytes.")
            }
        }
        guard (1...256).contains(maxActive) else { throw ValidationError("--max-active must be 1...256") }
        guard (1...256).contains(maxPerHost) else { throw ValidationError("--max-per-host must be 1...256") }
        guard (1...EngineConfig.maxConnections).contains(connections) else {
            throw ValidationError("--connections must be 1...\(EngineConfig.maxConnections)")
        }
        guard stallTimeout >= 1 && stallTimeout <= 86_400 else {
            throw ValidationError("--stall-timeout must be 1...86400 seconds")
        }
        guard checkpointInterval > 0 && checkpointInterval <= 60 else {
            throw ValidationError("--checkpoint-interval must be in (0, 60]")
        }
    }

    func run() throws {
        var engine = EngineConfig()
        engine.maxActive = maxActive
        engine.stallTimeout = stallTimeout
        engine.checkpointInterval = checkpointInterval
        engine.onEnd = onEnd
        engine.maxPerHost = maxPerHost
        engine.connections = connections
        var config = DaemonConfiguration(paths: Paths.resolve(home: home, socket: socket), engine: engine)
        config.watchNetwork = !noNetworkMonitor
        Foundation.exit(Daemon.run(config))
    }
}
