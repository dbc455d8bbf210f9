import Foundation
import TransferBase

/// Numbers for people: `12.3 MiB`, `4.5 MiB/s`, `1m05s`.
enum HumanFormat {
    private static let units = ["KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]

    /// `text` safe to print on a terminal (``PrintableText``, the daemon's rule too); with
    /// `keepingNewlines`, a line feed stays one (a message of several lines).
    static func printable(_ text: String, keepingNewlines: Bool = false) -> String {
        PrintableText.of(text, keepingNewlines: keepingNewlines)
    }

    /// Bytes in powers of 1024: `512 B`, `1.0 KiB`, `12.3 MiB`.
    static func bytes(_ count: Int64) -> String {
        if count < 1024 { return "\(count) B" }
        var value = Double(count) / 1024
        var unit = 0
        while value >= 1024, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        // 1023.95 KiB would round to "1024.0 KiB": show it as the next unit.
        if value >= 1023.95, unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        return String(format: "%.1f", value) + " " + units[unit]
    }

    /// The largest figure converted to an integer (any larger is shown as this).
    private static let largest = Double(Int64.max / 2)

    /// A rate in bytes per second: `4.5 MiB/s`, `0 B/s`.
    static func rate(_ bytesPerSecond: Double) -> String {
        guard bytesPerSecond.isFinite, bytesPerSecond > 0 else { return "0 B/s" }
        return bytes(Int64(min(bytesPerSecond, Self.largest).rounded())) + "/s"
    }

    /// A duration: `7s`, `1m05s`, `2h03m`, `3d04h`; `--` when unknown.
    static func duration(_ seconds: Double?) -> String {
        // A century or more is as good as unknown (and past Int64 it would trap: an ETA of a
        // stalled transfer was 9.6e18 s, and `status` crashed; found by an outside audit).
        guard let seconds, seconds.isFinite, seconds >= 0, seconds < 100 * 365 * 86400 else { return "--" }
        let total = Int64(seconds.rounded(.up))
        if total < 60 { return "\(total)s" }
        if total < 3600 { return String(format: "%lldm%02llds", total / 60, total % 60) }
        if total < 86400 { return String(format: "%lldh%02lldm", total / 3600, (total % 3600) / 60) }
        return String(format: "%lldd%02lldh", total / 86400, (total % 86400) / 3600)
    }

    /// A fraction as a percentage: `45%`, `99.5%` below 100 only when it matters; `--` when unknown.
    static func percent(_ fraction: Double?) -> String {
        guard let fraction, fraction.isFinite else { return "--" }
        let clamped = min(max(fraction, 0), 1) * 100
        // Never round up to 100% before the end.
        if clamped < 100, clamped > 99 { return String(format: "%.1f%%", (clamped * 10).rounded(.down) / 10) }
        return String(format: "%.0f%%", clamped.rounded(.down))
    }

    /// Seconds of a timeline with a unit: `1ms`, `1.20s`; `-` when absent.
    static func timing(_ seconds: Double?) -> String {
        guard let seconds, seconds.isFinite else { return "-" }
        if seconds < 1 { return String(format: "%.0fms", seconds * 1000) }
        return String(format: "%.2fs", seconds)
    }
}
