import TransferBase

/// The text of `daemon status`: one fact a line.
enum DaemonStatusText {
    /// Renders the daemon's status for people (paths ``HumanFormat/printable(_:keepingNewlines:)``).
    static func render(_ status: DaemonStatus) -> String {
        let counts = TransferState.allCases.compactMap { state in
            status.jobs[state.rawValue].flatMap { $0 > 0 ? "\($0) \(state.rawValue)" : nil }
        }
        return [
            "aftransferd \(status.version), pid \(status.pid), up \(HumanFormat.duration(status.uptime))",
            "  Home:       \(HumanFormat.printable(status.home))",
            "  Socket:     \(HumanFormat.printable(status.socket))",
            "  Network:    \(status.network)",
            "  Limits:     \(LimitsText.summary(status.limits))",
            "  Jobs:       \(counts.isEmpty ? "none" : counts.joined(separator: ", "))",
            "  Active:     \(status.active) of at most \(status.maxActive)",
            "  Rate:       \(HumanFormat.rate(status.rate))",
        ].joined(separator: "\n")
    }
}
