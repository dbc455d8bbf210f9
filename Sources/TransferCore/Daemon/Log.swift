@preconcurrency import Glibc

/// The daemon's log: one line an event on stderr, with the job id when there is one.
public enum Log {
    /// Writes one line.
    public static func info(_ message: String, job: Int64? = nil) {
        let prefix = Timestamp.rfc3339(Timestamp.now()) + (job.map { " job=\($0)" } ?? "")
        let line = prefix + " " + message.replacingOccurrences(of: "\n", with: " ") + "\n"
        fputs(line, stderr)
    }
}

extension Log {
    /// Writes a message line as is (start-up errors meant for people).
    public static func plain(_ message: String) {
        fputs(message + "\n", stderr)
    }
}
