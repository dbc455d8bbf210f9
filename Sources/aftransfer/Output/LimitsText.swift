import TransferBase

/// The daemon-wide limits as text: `limit`'s lines and `daemon status`'s one line.
enum LimitsText {
    /// `limit` without `--json`: one line each for the download, the upload and the schedule.
    static func lines(_ limits: LimitsInForce) -> String {
        func rate(_ r: Int64?) -> String { r.map { "\(HumanFormat.rate(Double($0))) (\($0) bytes/s)" } ?? "off" }
        return [
            "Download: \(rate(limits.download))\(limits.schedule == nil ? "" : " (from the schedule)")",
            "Upload:   \(rate(limits.upload))",
            "Schedule: \(limits.schedule ?? "none")",
        ].joined(separator: "\n")
    }

    /// `download 512 KiB/s, upload off, schedule '08:00,512K 19:00,off'` (`daemon status`).
    static func summary(_ limits: LimitsInForce) -> String {
        func rate(_ r: Int64?) -> String { r.map { HumanFormat.rate(Double($0)) } ?? "off" }
        var parts = ["download \(rate(limits.download))", "upload \(rate(limits.upload))"]
        if let schedule = limits.schedule { parts.append("schedule '\(schedule)'") }
        return parts.joined(separator: ", ")
    }
}
