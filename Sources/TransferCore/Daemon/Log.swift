@preconcurrency import Glibc

/// The daemon's log: one line an event on stderr, with the job id when there is one; text from
/// outside in it has its control characters shown (``PrintableText``).
public enum Log {
    /// Buffers the lines (the daemon calls this once): they are written together by ``flush()``
    /// at the end of each loop pass, not with one `write` each (three a job, with thousands of
    /// small files a tenth of the daemon's system calls). A `kill -9` loses at most the lines
    /// of the pass it interrupts.
    public static func buffer() {
        setvbuf(stderr, nil, _IOFBF, 1 << 16)
    }

    /// Writes the buffered lines.
    public static func flush() {
        fflush(stderr)
    }

    /// Writes one line.
    public static func info(_ message: String, job: Int64? = nil) {
        // Built on bytes: three lines a job, so Foundation's replacingOccurrences and string
        // interpolation were a twentieth of the daemon's work with thousands of small files.
        var line = Timestamp.rfc3339(Timestamp.now())
        if let job {
            line += " job="
            line += String(job)
        }
        line += " "
        // One line an event: a line feed in the message (a hook's output, a server's error)
        // becomes a space, and every other control character is shown (``PrintableText``), so
        // that nothing from outside moves the cursor of the terminal the log is read on.
        if PrintableText.needsEscaping(message) {
            let newline = UInt8(ascii: "\n")
            let joined =
                message.utf8.contains(newline)
                ? String(decoding: message.utf8.map { $0 == newline ? UInt8(ascii: " ") : $0 }, as: UTF8.self)
                : message
            line += PrintableText.of(joined)
        } else {
            line += message
        }
        line += "\n"
        fputs(line, stderr)
    }
}

extension Log {
    /// Writes a message line as is (start-up errors meant for people).
    public static func plain(_ message: String) {
        fputs(PrintableText.of(message, keepingNewlines: true) + "\n", stderr)
        fflush(stderr)
    }
}
