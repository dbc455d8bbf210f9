import ArgumentParser
import TransferBase

/// `aftransfer limit [--download RATE|off] [--upload RATE|off] [--schedule 'HH:MM,RATE ...'|off]
/// [--json]`: sets the daemon-wide limits (SPEC "Bandwidth"), or prints them without options.
struct LimitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "limit",
        abstract: "Show or set the daemon-wide bandwidth limits (kept across restarts).",
        discussion: """
            RATE is bytes per second like 500K or 2M (powers of 1024), or off. --download sets a fixed \
            download limit and clears a schedule; --schedule is a daily timetable of download limits \
            in local time ('08:00,512K 19:00,off': from each time on, that limit) and replaces the \
            fixed one; --schedule off clears it. Per-job --limit-rate applies inside these limits.
            """)

    // `.unconditional`: `--download -1K` is a bad rate, reported as such, not a missing value.
    @Option(parsing: .unconditional, help: ArgumentHelp("Daemon-wide download limit, or off.", valueName: "rate"))
    var download: String?

    @Option(parsing: .unconditional, help: ArgumentHelp("Daemon-wide upload limit, or off.", valueName: "rate"))
    var upload: String?

    @Option(help: ArgumentHelp("Daily timetable of download limits, or off.", valueName: "'HH:MM,RATE ...'"))
    var schedule: String?

    @Flag(help: "Print the limits in force as a JSON object.")
    var json = false

    @OptionGroup(title: "Global options")
    var global: GlobalOptions

    func validate() throws {
        // Refused here already, so that a malformed value never reaches (or starts) a daemon; the
        // refusal names the options (the RPC's names its params).
        do {
            _ = try BandwidthLimits().changed(
                download: download, upload: upload, schedule: schedule, naming: { "--" + $0 })
        } catch let error as TransferError {
            throw ValidationError(error.message)
        }
    }

    func run() throws {
        let client = try global.connect()
        let limits = try client.call(
            method: RPCMethod.daemonLimits,
            params: LimitsParams(download: download, upload: upload, schedule: schedule),
            as: LimitsInForce.self)
        if json {
            try JSONOutput.print(limits)
            return
        }
        Console.out(LimitsText.lines(limits))
    }
}
