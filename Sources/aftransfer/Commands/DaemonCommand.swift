import ArgumentParser
import Foundation
import TransferCore

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
    struct Stop: ParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Stop aftransferd (running transfers are checkpointed and resume on the next start).")

        /// How long to wait for the daemon to go away, in seconds.
        static let timeout = 10.0

        @OptionGroup(title: "Global options") var global: GlobalOptions

        func run() throws {
            let paths = global.paths
            guard let client = try? RPCClient.connect(path: paths.socket) else {
                Console.out("aftransferd is not running")
                return
            }
            let pid = try? client.call(
                method: RPCMethod.daemonStatus, params: [String: String](), as: DaemonStatus.self
            ).pid
            do {
                try client.call(method: RPCMethod.daemonShutdown)
            } catch let error as RPCError where error.code == RPCErrorCode.shuttingDown {
                // Already on its way out.
            } catch ClientError.connectionClosed {
                // It went away before answering.
            }
            client.close()
            let deadline = Date().addingTimeInterval(Self.timeout)
            while Date() < deadline {
                let answers = (try? RPCClient.connect(path: paths.socket)) != nil
                let alive = pid.map { kill($0, 0) == 0 } ?? false
                if !answers && !alive {
                    Console.out("aftransferd stopped")
                    return
                }
                usleep(50_000)
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
            let counts = TransferState.allCases.compactMap { state in
                status.jobs[state.rawValue].flatMap { $0 > 0 ? "\($0) \(state.rawValue)" : nil }
            }
            Console.out(
                [
                    "aftransferd \(status.version), pid \(status.pid), running since \(status.startedAt)",
                    "  Home:       \(status.home)",
                    "  Socket:     \(status.socket)",
                    "  Network:    \(status.network)",
                    "  Max active: \(status.maxActive)",
                    "  Jobs:       \(counts.isEmpty ? "none" : counts.joined(separator: ", "))",
                ].joined(separator: "\n"))
        }
    }
}
