import Foundation

/// Free space of a file system (`statvfs`), the one place that asks. Used by the disk-space
/// watcher (jobs waiting with `waitReason` `"disk"`), by a download that checks a known size
/// before it writes, and by the guard that refuses new rows while the home's disk is full.
public enum DiskSpace {
    /// Bytes available to the daemon's user on the file system holding `path`; the nearest
    /// existing ancestor is asked when `path` does not exist yet (a part not created yet, a
    /// directory `--create-dirs` will make). Nil when no ancestor can be asked, or when the file
    /// system counts no blocks at all (ramfs, some FUSE file systems: they have no size, and
    /// "0 bytes free" from them means nothing).
    public static func available(at path: String) -> Int64? {
        var p = path.isEmpty ? "/" : path
        while true {
            var s = statvfs()
            if statvfs(p, &s) == 0 {
                if s.f_blocks == 0 { return nil }
                // f_bavail: what an unprivileged writer may use (root's reserve left out).
                let bytes = UInt64(s.f_bavail).multipliedReportingOverflow(by: UInt64(s.f_frsize))
                return bytes.overflow ? Int64.max : Int64(clamping: bytes.partialValue)
            }
            guard errno == ENOENT || errno == ENOTDIR, p != "/" else { return nil }
            let parent = (p as NSString).deletingLastPathComponent
            p = parent.isEmpty ? "/" : parent
        }
    }

    /// "1.5 MiB": a size for messages (powers of 1024, as `--limit-rate` reads them).
    public static func describe(_ bytes: Int64) -> String {
        let units = ["bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"]
        var v = Double(max(0, bytes))
        var u = 0
        // As the CLI's sizes: a value that would print as 1024.0 is the next unit's 1.0.
        while v >= 1023.95 && u < units.count - 1 {
            v /= 1024
            u += 1
        }
        return u == 0 ? "\(max(0, bytes)) bytes" : "\(String(format: "%.1f", v)) \(units[u])"
    }
}
