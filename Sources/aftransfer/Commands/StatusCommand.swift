import ArgumentParser
import TransferBase

/// `aftransfer status ID [--json]`.
struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "Show one job: progress, error, retries, and its attempts.")

    @Argument(help: "The job's id.")
    var id: Int64

    @Flag(help: "Print the job object as JSON.")
    var json = false

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    func run() throws {
        let client = try global.connect()
        let result = try client.call(
            method: RPCMethod.transferGet.rawValue, params: JSONValue(encoding: GetParams(id: id)))
        if json {
            try JSONOutput.print(result)
        } else {
            let job = try result.decode(as: JobSnapshot.self)
            // A segmented download's ranges are not in the job object: asked for separately.
            var segments: [SegmentProgress] = []
            if job.state == .running && (job.connections ?? 0) > 1 {
                segments =
                    (try? client.call(
                        method: RPCMethod.transferSegments, params: GetParams(id: id), as: SegmentsResult.self))?
                    .segments ?? []
            }
            Console.out(JobSummary.lines(job, segments: segments).joined(separator: "\n"))
        }
    }
}
