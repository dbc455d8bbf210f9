import Foundation

/// RFC 3339 UTC timestamps for the job object.
public enum Timestamp {
    /// Seconds since 1970 now.
    public static func now() -> Double { Date().timeIntervalSince1970 }

    /// `2026-11-21T20:00:00Z` (milliseconds when not whole).
    public static func rfc3339(_ t: Double) -> String {
        // Clamped to years 1970...9999 so no value can trap the conversion.
        let t = t.isFinite ? min(max(t, 0), 253_402_300_799) : 0
        var secs = time_t(t.rounded(.down))
        var tmv = tm()
        gmtime_r(&secs, &tmv)
        let base = String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d", Int(tmv.tm_year) + 1900, Int(tmv.tm_mon) + 1, Int(tmv.tm_mday),
            Int(tmv.tm_hour), Int(tmv.tm_min), Int(tmv.tm_sec))
        let ms = Int(((t - t.rounded(.down)) * 1000).rounded(.down))
        return ms > 0 ? base + String(format: ".%03dZ", ms) : base + "Z"
    }
}
