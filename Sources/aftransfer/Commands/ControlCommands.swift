import ArgumentParser
import TransferCore

/// The commands that change jobs: `pause`, `resume`, `cancel`, `retry` and `remove`. Each acts on
/// every id it can, names each refusal on stderr, and exits 2 if any id was refused.
enum ControlCommands {
    /// Calls a control method and reports: one `job N: STATE` line on stdout per job acted on,
    /// one line on stderr per refusal.
    /// - Parameters:
    ///   - method: the RPC method (``RPCMethod``).
    ///   - verb: the command's name, for messages.
    ///   - params: the ids (and `deleteFiles`).
    ///   - global: where the daemon is.
    static func run(method: String, verb: String, params: ControlParams, global: GlobalOptions) throws {
        let client = try global.connect()
        let result = try client.call(method: method, params: params, as: ControlResult.self)
        for job in result.jobs {
            Console.out(
                "job \(job.id): " + (method == RPCMethod.transferRemove.rawValue ? "removed" : job.state.rawValue))
        }
        for refusal in result.refused {
            // The daemon's sentence names the job and its state ("cannot pause job 1: it is completed").
            if refusal.state != nil {
                Console.error(refusal.message)
            } else {
                Console.error("cannot \(verb) job \(refusal.id): no such job")
            }
        }
        if !result.refused.isEmpty { throw CLIFailure(CLIFailure.usage) }
    }
}

/// `aftransfer pause ID...`.
struct PauseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause", abstract: "Pause queued, running or waiting jobs; their data is kept.")

    @Argument(help: "The jobs' ids.") var ids: [Int64]
    @OptionGroup(title: "Global options") var global: GlobalOptions

    func run() throws {
        try ControlCommands.run(
            method: RPCMethod.transferPause.rawValue, verb: "pause", params: ControlParams(ids: ManyIds.all(ids)),
            global: global)
    }
}

/// `aftransfer resume ID...`.
struct ResumeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "resume", abstract: "Resume paused jobs from where they stopped.")

    @Argument(help: "The jobs' ids.") var ids: [Int64]
    @OptionGroup(title: "Global options") var global: GlobalOptions

    func run() throws {
        try ControlCommands.run(
            method: RPCMethod.transferResume.rawValue, verb: "resume", params: ControlParams(ids: ManyIds.all(ids)),
            global: global)
    }
}

/// `aftransfer cancel ID...`.
struct CancelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel", abstract: "Cancel jobs that have not ended; their partial data is removed.")

    @Argument(help: "The jobs' ids.") var ids: [Int64]
    @OptionGroup(title: "Global options") var global: GlobalOptions

    func run() throws {
        try ControlCommands.run(
            method: RPCMethod.transferCancel.rawValue, verb: "cancel", params: ControlParams(ids: ManyIds.all(ids)),
            global: global)
    }
}

/// `aftransfer retry ID...`.
struct RetryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retry", abstract: "Queue failed or cancelled jobs again (a failed download resumes).")

    @Argument(help: "The jobs' ids.") var ids: [Int64]
    @OptionGroup(title: "Global options") var global: GlobalOptions

    func run() throws {
        try ControlCommands.run(
            method: RPCMethod.transferRetry.rawValue, verb: "retry", params: ControlParams(ids: ManyIds.all(ids)),
            global: global)
    }
}

/// `aftransfer remove ID... [--delete-files]`.
struct RemoveCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "remove", abstract: "Forget jobs (a running one is cancelled first).")

    @Argument(help: "The jobs' ids.") var ids: [Int64]

    @Flag(help: "Also delete a completed download's file.")
    var deleteFiles = false

    @OptionGroup(title: "Global options") var global: GlobalOptions

    func run() throws {
        try ControlCommands.run(
            method: RPCMethod.transferRemove.rawValue, verb: "remove",
            params: ControlParams(ids: ManyIds.all(ids), deleteFiles: deleteFiles ? true : nil),
            global: global)
    }
}
