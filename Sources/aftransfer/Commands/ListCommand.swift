import ArgumentParser
import TransferCore

/// `aftransfer list [--state STATE] [--limit N] [--json]`.
struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the jobs, oldest first.")

    @Option(
        help: ArgumentHelp(
            "Only jobs in this state: \(TransferState.allCases.map(\.rawValue).joined(separator: ", ")).",
            valueName: "state"))
    var state: TransferState?

    /// `--limit N`: only the first N jobs, in the list's order (after `--state`).
    @Option(help: ArgumentHelp("Only the first N jobs (oldest first).", valueName: "n"))
    var limit: Int?

    @Flag(help: "Print a JSON array of job objects.")
    var json = false

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    /// Refuses a `--limit` below 1 (exit 2).
    func validate() throws {
        if let limit, limit < 1 { throw ValidationError("--limit must be 1 or more.") }
    }

    /// The `transfer.list` params: `{"state": "running", "limit": 10}`, each only when given.
    var params: JSONValue {
        var params: [String: JSONValue] = [:]
        if let state { params["state"] = .string(state.rawValue) }
        if let limit { params["limit"] = .int(Int64(limit)) }
        return .object(params)
    }

    func run() throws {
        let client = try global.connect()
        if json {
            // Copied from the socket as it arrives: 100,000 jobs are never decoded here.
            let outcome = try client.callStreamingResult(method: RPCMethod.transferList.rawValue, params: params) {
                Console.write(bytes: $0, to: .stdout)
            }
            switch outcome {
            case .streamed:
                Console.write("\n", to: .stdout)
            case .decoded(let result):
                try JSONOutput.print(result)
            }
            return
        }
        let result = try client.call(method: RPCMethod.transferList.rawValue, params: params)
        // The daemon applies the limit; applying it here too costs nothing.
        let jobs = try result.decode(as: [JobSnapshot].self).prefix(limit ?? Int.max)
        let lines = JobTable.lines(Array(jobs))
        if lines.isEmpty {
            Console.out(state.map { "No \($0.rawValue) jobs." } ?? "No jobs.")
        } else {
            Console.out(lines.joined(separator: "\n"))
        }
    }
}

extension TransferState: ExpressibleByArgument {}
