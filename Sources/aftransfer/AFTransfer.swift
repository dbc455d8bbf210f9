import ArgumentParser
import TransferBase

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The `aftransfer` CLI: a thin client of `aftransferd`. It renders; the daemon decides.
@main
struct AFTransfer: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "aftransfer",
        abstract: "Background downloads and uploads, run by the aftransferd daemon.",
        discussion: """
            Options, global ones too, come after the subcommand: aftransfer list --json --home DIR. \
            The daemon is started when no daemon answers (not with --no-autostart).
            Exit status: 0 success; 1 a job failed or was cancelled; 2 bad usage or refused input; \
            3 the daemon could not be reached or started; 23 the output could not be written; \
            124 wait --timeout ran out.
            """,
        version: AFTransferVersion.string,
        subcommands: [
            DownloadCommand.self, UploadCommand.self, ListCommand.self, StatusCommand.self,
            WatchCommand.self, WaitCommand.self, PauseCommand.self, ResumeCommand.self,
            CancelCommand.self, RetryCommand.self, RemoveCommand.self, SetUrlCommand.self, CurlCommand.self,
            LimitCommand.self,
            DaemonCommand.self,
        ])

    /// A bare `aftransfer` names no command: bad usage (exit 2, as curl and git end), with the
    /// overview on stderr. `aftransfer --help` still prints it on stdout and exits 0.
    func run() throws {
        Console.write(Self.helpMessage() + "\n", to: .stderr)
        throw CLIFailure(CLIFailure.usage, "no command given (aftransfer --help lists them)")
    }

    /// Parses, runs, and maps every error to the SPEC's exit statuses.
    static func main() {
        Console.reserveStandardDescriptors()
        if let i = Paths.firstArgumentNotUTF8() {
            exit(for: CLIFailure.usage("argument \(i) is not valid UTF-8 (paths and options must be UTF-8)"))
        }
        do {
            var command = try parseAsRoot(ManyIds.take(from: Array(CommandLine.arguments.dropFirst())))
            try command.run()
        } catch {
            exit(for: error)
        }
        if let e = Console.stdoutError {
            Console.error("cannot write the output: \(String(cString: strerror(e)))")
            Glibc.exit(CLIFailure.outputLost)
        }
        Glibc.exit(0)
    }

    /// Prints `error` and exits with its status: ``CLIFailure``'s own, the RPC error table's,
    /// 3 for an unreachable daemon, 2 for usage errors (argument-parser's default would be 64).
    static func exit(for error: Error) -> Never {
        switch error {
        case let failure as CLIFailure:
            if let message = failure.message { Console.error(message) }
            Glibc.exit(failure.status)
        case let error as RPCError:
            Console.error(error.message)
            Glibc.exit(error.exitStatus)
        case let error as ClientError:
            Console.error(error.description)
            Glibc.exit(error.exitStatus)
        case let error as DaemonLauncher.LaunchError:
            Console.error(error.message)
            Glibc.exit(error.exitStatus)
        default:
            if exitCode(for: error) == .validationFailure {
                Console.write(HumanFormat.printable(fullMessage(for: error), keepingNewlines: true) + "\n", to: .stderr)
                Glibc.exit(CLIFailure.usage)
            }
            exit(withError: error)
        }
    }
}
