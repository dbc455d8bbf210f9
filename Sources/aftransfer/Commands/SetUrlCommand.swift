import ArgumentParser
import TransferBase

/// `aftransfer set-url ID URL`: a new URL for a download that is not running (a renewed link).
struct SetUrlCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "set-url",
        abstract: "Give a queued, paused, waiting or failed download a new URL (e.g. a renewed signed link).",
        discussion: """
            The job keeps its state (a paused job stays paused until resume, a failed one until retry) \
            and its partial data; the next attempt resumes with If-Range, so a different file at the new \
            URL starts over from byte 0. Exit status 2 when the job is running, ended, an upload, or the \
            URL is refused.
            """)

    @Argument(help: "The job's id.") var id: Int64
    @Argument(help: "The new URL (http or https).") var url: String
    @Flag(help: "Print the job object as JSON.") var json = false
    @OptionGroup(title: "Global options") var global: GlobalOptions

    func run() throws {
        let client = try global.connect()
        let job = try client.call(
            method: RPCMethod.transferSetUrl, params: SetUrlParams(id: id, url: url), as: JobSnapshot.self)
        if json {
            try JSONOutput.print(job)
        } else {
            Console.out("job \(job.id): \(job.state.rawValue), \(job.url)")
        }
    }
}
