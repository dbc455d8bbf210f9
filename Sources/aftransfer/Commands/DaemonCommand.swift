import ArgumentParser
import Foundation
import TransferBase

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// `aftransfer daemon start | stop | status [--json]`.
struct DaemonCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "daemon",
        abstract: "Start, stop or inspect aftransferd.",
        subcommands: [Start.self, Stop.self, Status.self])

    /// `daemon start`: starts the daemon unless one answers, and prints its pid.
    struct Start: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Start aftransferd for this home unless it runs, and print its pid.")

        @OptionGroup(title: "Global options") var global: GlobalOptions

        func run() throws {
            let paths = global.paths
            let client: RPCClient
            if let running = try? RPCClient.connect(path: paths.socket) {
                client = running
                Console.error("aftransferd is already running")
            } else {
                do {
                    client = try DaemonLauncher.connect(paths: paths, autostart: true)
                } catch let error as DaemonLauncher.LaunchError {
                    throw CLIFailure(CLIFailure.unreachable, error.message)
                }
            }
            let status = try client.call(
                method: RPCMethod.daemonStatus, params: [String: String](), as: DaemonStatus.self)
            Console.out(String(status.pid))
        }
    }

    /// `daemon stop`: asks the daemon to shut down and waits until it is gone.
    ///
    /// "Gone" is the home's lock released (so that a following `daemon start` finds it free), or,
    /// when the lock cannot be looked at, the socket no longer answering. Never the pid: an exited
    /// daemon that its parent has not reaped yet is a zombie that still answers `kill(pid, 0)`.
    struct Stop: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop aftransferd (running transfers are checkpointed and resume on the next start).")

        /// How long to wait for the daemon to go away, in seconds.
        static let timeout = 10.0
        /// How often to look whether it went, in microseconds.
        static let pollInterval: useconds_t = 20_000

        @OptionGroup(title: "Global options") var global: GlobalOptions

        func run() throws {
            let paths = global.paths
            guard let client = try? RPCClient.connect(path: paths.socket) else {
                Console.out("aftransferd is not running")
                return
            }
            // The daemon's own home: with --socket, it need not be ours.
            let home =
                (try? client.call(
                    method: RPCMethod.daemonStatus, params: [String: String](), as: DaemonStatus.self
                ).home) ?? paths.home
            do {
                try client.call(method: RPCMethod.daemonShutdown)
            } catch let error as RPCError where error.code == RPCErrorCode.shuttingDown {
                // Already on its way out.
            } catch ClientError.connectionClosed {
                // It went away before answering.
            }
            client.close()
            let lock = Paths.resolve(home: home, socket: paths.socket).lock
            let deadline = Date().addingTimeInterval(Self.timeout)
            while Date() < deadline {
                let stopped: Bool
                if let held = DaemonLock.isHeld(at: lock) {
                    stopped = !held
                } else {
                    stopped = (try? RPCClient.connect(path: paths.socket)) == nil
                }
                if stopped {
                    Console.out("aftransferd stopped")
                    return
                }
                usleep(Self.pollInterval)
            }
            throw CLIFailure(CLIFailure.jobFailed, "aftransferd did not stop within \(Int(Self.timeout)) s")
        }
    }

    /// `daemon status [--json]`: never starts a daemon; exits 3 when none answers.
    struct Status: ParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show whether aftransferd runs, and its state.")

        @Flag(help: "Print the status as a JSON object.")
        var json = false

        @OptionGroup(title: "Global options") var global: GlobalOptions

        func run() throws {
            let paths = global.paths
            guard let client = try? RPCClient.connect(path: paths.socket) else {
                throw CLIFailure(
                    CLIFailure.unreachable, "aftransferd is not running (no daemon answers on \(paths.socket))")
            }
            let result = try client.call(method: RPCMethod.daemonStatus, params: .object([:]))
            if json {
                try JSONOutput.print(result)
                return
            }
            let status = try result.decode(as: DaemonStatus.self)
            Console.out(DaemonStatusText.render(status))
        }
    }
}
