import ArgumentParser
import TransferBase

/// `aftransfer curl ID`: the equivalent curl command, secrets redacted (the daemon builds it).
struct CurlCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "curl", abstract: "Print the curl command equivalent to a job, secrets redacted.")

    /// The RPC method that renders a job as a curl command: `{"id": N}` → `{"command": "curl …"}`.
    static let method = "transfer.curl"

    @Argument(help: "The job's id.")
    var id: Int64

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    func run() throws {
        let client = try global.connect()
        let result = try client.call(method: Self.method, params: JSONValue(encoding: GetParams(id: id)))
        guard case .string(let command)? = result["command"] else {
            throw ClientError.protocolViolation("a \(Self.method) result without a command")
        }
        Console.out(command)
    }
}
