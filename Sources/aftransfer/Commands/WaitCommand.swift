import ArgumentParser
import TransferBase

/// `aftransfer wait ID... [--timeout SECONDS]`.
struct WaitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "wait",
        abstract: "Wait until the jobs end.",
        discussion: """
            Exits 0 when every job completed, 1 when one failed, was cancelled or was removed, \
            124 when --timeout ran out, 2 for an unknown id.
            """)

    @Argument(help: "The jobs' ids.")
    var ids: [Int64]

    @Option(
        parsing: .unconditional, help: ArgumentHelp("Give up after this many seconds (exit 124).", valueName: "seconds")
    )
    var timeout: Double?

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    func validate() throws {
        if ids.isEmpty { throw ValidationError("missing job id.") }
        if let timeout, !(timeout >= 0) || !timeout.isFinite {
            throw ValidationError("--timeout must be a number of seconds.")
        }
    }

    func run() throws {
        let client = try global.connect()
        // A repeated id is one job, waited for (and named) once, as the control commands act once.
        var seen = Set<Int64>()
        let jobs = try ManyIds.all(ids).filter { seen.insert($0).inserted }.map {
            try client.call(method: RPCMethod.transferGet.rawValue, params: GetParams(id: $0), as: JobSnapshot.self)
        }
        let follower = JobFollower(client: client, jobs: jobs)
        guard try follower.follow(timeout: timeout, onUpdate: { _ in }) else {
            let pending = follower.jobs.filter { !$0.state.isFinal }.map { "\($0.id) (\($0.state.rawValue))" }
            throw CLIFailure(CLIFailure.timedOut, "timed out waiting for job \(pending.joined(separator: ", "))")
        }
        for job in follower.jobs where job.state != .completed || follower.gone.contains(job.id) {
            if follower.gone.contains(job.id) {
                Console.error("job \(job.id) was removed")
            } else if let error = job.error, error.code.rawValue == job.state.rawValue {
                // `job 4 cancelled: cancelled by the user`, not `cancelled: cancelled: …`.
                Console.error("job \(job.id) \(job.state.rawValue): \(HumanFormat.printable(error.message))")
            } else if let error = JobText.error(job) {
                Console.error("job \(job.id) \(job.state.rawValue): \(error)")
            } else {
                Console.error("job \(job.id) \(job.state.rawValue)")
            }
        }
        if !follower.allCompleted { throw CLIFailure(CLIFailure.jobFailed) }
    }
}
