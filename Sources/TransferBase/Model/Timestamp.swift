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
        // Digits by hand: String(format:) was 6% of the daemon's CPU with thousands of jobs.
        var out: [UInt8] = []
        out.reserveCapacity(24)
        func put(_ v: Int, _ width: Int) {
            var d = 1
            for _ in 1..<width { d *= 10 }
            var v = v
            while d > 0 {
                out.append(UInt8(48 + (v / d) % 10))
                v %= d
                d /= 10
            }
        }
        put(Int(tmv.tm_year) + 1900, 4)
        out.append(UInt8(ascii: "-"))
        put(Int(tmv.tm_mon) + 1, 2)
        out.append(UInt8(ascii: "-"))
        put(Int(tmv.tm_mday), 2)
        out.append(UInt8(ascii: "T"))
        put(Int(tmv.tm_hour), 2)
        out.append(UInt8(ascii: ":"))
        put(Int(tmv.tm_min), 2)
        out.append(UInt8(ascii: ":"))
        put(Int(tmv.tm_sec), 2)
        let ms = Int(((t - t.rounded(.down)) * 1000).rounded(.down))
        if ms > 0 {
            out.append(UInt8(ascii: "."))
            put(ms, 3)
        }
        out.append(UInt8(ascii: "Z"))
        return String(decoding: out, as: UTF8.self)
    }
}
