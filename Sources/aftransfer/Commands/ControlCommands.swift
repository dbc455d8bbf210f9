import ArgumentParser
import TransferBase

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
        let removing = method == RPCMethod.transferRemove.rawValue
        // Read a job at a time as the answer arrives (a command on 100,000 jobs), the lines on
        // stdout gathered into large writes.
        var out = ""
        var refused = 0
        func report(_ member: String, _ object: JSONValue) throws {
            guard case .int(let id)? = object["id"] else {
                throw ClientError.protocolViolation("a \(method) result entry without an id")
            }
            switch member {
            case "jobs":
                guard case .string(let state)? = object["state"] else {
                    throw ClientError.protocolViolation("a \(method) result job without a state")
                }
                out += "job \(id): \(removing ? "removed" : state)\n"
                if out.utf8.count >= 1 << 16 { flush(&out) }
            case "refused":
                refused += 1
                // The daemon's sentence names the job and its state ("cannot pause job 1: it is completed").
                if case .string(let message)? = object["message"], object["state"] != .null, object["state"] != nil {
                    Console.error(message)
                } else {
                    Console.error("cannot \(verb) job \(id): no such job")
                }
            default:
                break
            }
        }
        var scanner = ResultElementScanner { member, element in
            if member == "refused" { flush(&out) }  // the jobs' lines before the refusals, as ever
            try report(member, try JSONParser.parse(element))
        }
        switch try client.callStreamingResult(
            method: method, params: try JSONValue(encoding: params),
            into: {
                try scanner.feed($0)
            })
        {
        case .streamed:
            guard scanner.isComplete else {
                throw ClientError.protocolViolation(
                    "a \(method) result that is not {\"jobs\": [...], \"refused\": [...]}")
            }
        case .decoded(let result):
            guard case .array(let jobs)? = result["jobs"], case .array(let refusals)? = result["refused"] else {
                throw ClientError.protocolViolation(
                    "a \(method) result that is not {\"jobs\": [...], \"refused\": [...]}")
            }
            for job in jobs { try report("jobs", job) }
            flush(&out)
            for refusal in refusals { try report("refused", refusal) }
        }
        flush(&out)
        if refused > 0 { throw CLIFailure(CLIFailure.usage) }
    }

    /// Writes the gathered lines to stdout.
    private static func flush(_ out: inout String) {
        guard !out.isEmpty else { return }
        Console.write(out, to: .stdout)
        out.removeAll(keepingCapacity: true)
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
