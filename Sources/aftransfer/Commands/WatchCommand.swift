import ArgumentParser
import TransferBase

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// `aftransfer watch [ID...]`: live progress bars on stdout until those jobs end.
struct WatchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "watch",
        abstract: "Show live progress until the jobs end (all unfinished jobs when no ids are given).",
        discussion: """
            Without ids on a terminal: every unfinished job one line (id, name, state, bar, bytes, rate, ETA) \
            and a totals line, redrawn in place and fitted to the terminal; jobs queued meanwhile join it. \
            Ctrl-C leaves the jobs running. Exits 0 when every job completed, 1 when one failed or was cancelled.
            """)

    @Argument(help: "The jobs' ids.")
    var ids: [Int64] = []

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    func run() throws {
        let client = try global.connect()
        let jobs: [JobSnapshot]
        var subscribed = false
        if ids.isEmpty {
            // Subscribed first, to every job: one queued after the list below is followed too.
            subscribed =
                (try? client.call(method: RPCMethod.eventsSubscribe.rawValue, params: .some(.object([:])))) != nil
            jobs = try client.call(
                method: RPCMethod.transferList.rawValue, params: ListParams(), as: [JobSnapshot].self
            )
            .filter { !$0.state.isFinal }
            if jobs.isEmpty {
                Console.out("No unfinished jobs.")
                return
            }
        } else {
            jobs = try ManyIds.all(ids).map {
                try client.call(method: RPCMethod.transferGet.rawValue, params: GetParams(id: $0), as: JobSnapshot.self)
            }
        }
        let follower = JobFollower(client: client, jobs: jobs, subscribed: subscribed, followsNewJobs: subscribed)
        if ids.isEmpty && Console.Stream.stdout.isTerminal {
            // The whole queue as a screen; Ctrl-C ends only the view (the jobs are the daemon's),
            // leaving the cursor below it.
            Console.endLineOnInterrupt(.stdout)
            try follower.follow(drawingOn: QueueView(stream: .stdout))
        } else {
            if Console.Stream.stdout.isTerminal { Console.endLineOnInterrupt(.stdout) }
            try follower.follow(drawingOn: ProgressRenderer(stream: .stdout))
        }
        if !follower.allCompleted { throw CLIFailure(CLIFailure.jobFailed) }
    }
}
