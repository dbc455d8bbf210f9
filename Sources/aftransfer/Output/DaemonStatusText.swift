import TransferCore

/// The text of `daemon status`: one fact a line.
enum DaemonStatusText {
    /// Renders the daemon's status for people.
    static func render(_ status: DaemonStatus) -> String {
        let counts = TransferState.allCases.compactMap { state in
            status.jobs[state.rawValue].flatMap { $0 > 0 ? "\($0) \(state.rawValue)" : nil }
        }
        return [
            "aftransferd \(status.version), pid \(status.pid), up \(HumanFormat.duration(status.uptime))",
            "  Home:       \(status.home)",
            "  Socket:     \(status.socket)",
            "  Network:    \(status.network)",
            "  Limits:     \(limits(status.limits))",
            "  Jobs:       \(counts.isEmpty ? "none" : counts.joined(separator: ", "))",
            "  Active:     \(status.active) of at most \(status.maxActive)",
            "  Rate:       \(HumanFormat.rate(status.rate))",
        ].joined(separator: "\n")
    }

    /// `download 512 KiB/s, upload off, schedule '08:00,512K 19:00,off'`.
    static func limits(_ limits: LimitsInForce) -> String {
        func rate(_ value: Int64?) -> String { value.map { HumanFormat.rate(Double($0)) } ?? "off" }
        var parts = ["download \(rate(limits.download))", "upload \(rate(limits.upload))"]
        if let schedule = limits.schedule { parts.append("schedule '\(schedule)'") }
        return parts.joined(separator: ", ")
    }
}
