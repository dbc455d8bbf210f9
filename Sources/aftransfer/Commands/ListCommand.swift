import ArgumentParser
import TransferBase

/// `aftransfer list [--state STATE] [--limit N] [--json]`.
struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the jobs, oldest first.")

    @Option(
        help: ArgumentHelp(
            "Only jobs in this state.",  // the parser lists the values after it
            valueName: "state"))
    var state: TransferState?

    /// `--limit N`: only the first N jobs, in the list's order (after `--state`).
    @Option(parsing: .unconditional, help: ArgumentHelp("Only the first N jobs (oldest first).", valueName: "n"))
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
    func params() throws -> JSONValue { try JSONValue(encoding: ListParams(state: state, limit: limit)) }

    func run() throws {
        let client = try global.connect()
        if json {
            // Copied from the socket as it arrives: 100,000 jobs are never decoded here.
            let outcome = try client.callStreamingResult(method: RPCMethod.transferList.rawValue, params: try params())
            {
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
        let result = try client.call(method: RPCMethod.transferList.rawValue, params: try params())
        let lines = JobTable.lines(try result.decode(as: [JobSnapshot].self))  // the daemon applied the limit
        if lines.isEmpty {
            Console.out(state.map { "No \($0.rawValue) jobs." } ?? "No jobs.")
        } else {
            Console.out(lines.joined(separator: "\n"))
        }
    }
}

extension TransferState: ExpressibleByArgument {}
