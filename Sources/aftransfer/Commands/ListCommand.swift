import ArgumentParser
import TransferCore

/// `aftransfer list [--state STATE] [--json]`.
struct ListCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "List the jobs, oldest first.")

    @Option(
        help: ArgumentHelp(
            "Only jobs in this state: \(TransferState.allCases.map(\.rawValue).joined(separator: ", ")).",
            valueName: "state"))
    var state: TransferState?

    @Flag(help: "Print a JSON array of job objects.")
    var json = false

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    func run() throws {
        let client = try global.connect()
        let result = try client.call(method: RPCMethod.list, params: JSONValue(encoding: ListParams(state: state)))
        if json {
            try JSONOutput.print(result)
            return
        }
        let jobs = try result.decode(as: [JobSnapshot].self)
        let lines = JobTable.lines(jobs)
        if lines.isEmpty {
            Console.out(state.map { "No \($0.rawValue) jobs." } ?? "No jobs.")
        } else {
            Console.out(lines.joined(separator: "\n"))
        }
    }
}

extension TransferState: ExpressibleByArgument {}
