import Foundation

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// The descriptor ``Console/endLineOnInterrupt(_:)`` ends the line on (a signal handler cannot
/// capture it).
nonisolated(unsafe) private var consoleInterruptFD: Int32 = STDOUT_FILENO

/// Where the CLI writes: stdout for results (ids, JSON, tables), stderr for messages and `--wait`
/// progress.
enum Console {
    /// One of the two output streams.
    enum Stream {
        case stdout
        case stderr

        /// The file descriptor.
        var fd: Int32 { self == .stdout ? STDOUT_FILENO : STDERR_FILENO }

        /// Whether the stream is a terminal that can draw (bars, redrawn lines and colors only
        /// there): not one whose `TERM` is `dumb`, which gets the plain lines a pipe gets.
        var isTerminal: Bool { isatty(fd) == 1 && !Console.isDumbTerminal }

        /// The terminal's width in columns, or nil when not a terminal.
        var columns: Int? {
            var size = winsize()
            guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 else { return nil }
            return Int(size.ws_col)
        }

        /// The terminal's height in rows, or nil when not a terminal.
        var rows: Int? {
            var size = winsize()
            guard ioctl(fd, UInt(TIOCGWINSZ), &size) == 0, size.ws_row > 0 else { return nil }
            return Int(size.ws_row)
        }
    }

    /// Whether `TERM` says the terminal understands no control sequences (Emacs' shell, some
    /// CI logs).
    static let isDumbTerminal = getenv("TERM").map { String(cString: $0) } == "dumb"

    /// On Ctrl-C, ends the line on `stream` and exits 130 (as the signal would): lines drawn in
    /// place (bars, the queue) then leave the cursor below them, not the shell's prompt on a bar.
    /// Only the view ends; the jobs are the daemon's and go on.
    static func endLineOnInterrupt(_ stream: Stream) {
        consoleInterruptFD = stream.fd
        signal(SIGINT) { _ in
            var newline: UInt8 = 10
            _ = Glibc.write(consoleInterruptFD, &newline, 1)
            _exit(130)
        }
    }

    /// Writes `text` followed by a newline to stdout and flushes.
    static func out(_ text: String) {
        write(text + "\n", to: .stdout)
    }

    /// Writes `aftransfer: text` followed by a newline to stderr.
    static func error(_ text: String) {
        // Messages name paths, URLs and values from outside (a list file, the daemon's refusals).
        write("aftransfer: " + HumanFormat.printable(text, keepingNewlines: true) + "\n", to: .stderr)
    }

    /// Writes `text` as is (no newline added), straight to the file descriptor: nothing is
    /// buffered, so an id printed before a long `--wait` reaches a pipe at once.
    static func write(_ text: String, to stream: Stream) {
        Array(text.utf8).withUnsafeBytes { write(bytes: $0, to: stream) }
    }

    /// The error of the first write to stdout that failed (a full disk, a closed stdout), if
    /// any: the command then exits ``CLIFailure/outputLost`` (``AFTransfer/main()``), so that
    /// `id=$(aftransfer download …)` or `list --json > file` never passes for a success with its
    /// output lost.
    nonisolated(unsafe) private(set) static var stdoutError: Int32?

    /// Fills a closed stdin, stdout or stderr with `/dev/null` before anything else is opened:
    /// the daemon's socket would otherwise become descriptor 1 and take what is printed. A
    /// closed stdout counts as a failed write (``stdoutError``).
    static func reserveStandardDescriptors() {
        for fd: Int32 in 0...2 where fcntl(fd, F_GETFD) == -1 && errno == EBADF {
            _ = open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY)  // the lowest free: this one
            if fd == 1 { stdoutClosed = true }
        }
    }

    /// Whether stdout was closed when the command started: the first write to it fails
    /// (`EBADF`); a command that prints nothing there (`wait`) is not failed by it.
    nonisolated(unsafe) private static var stdoutClosed = false

    /// Writes `bytes` as they are (say, a JSON result copied from the daemon), unbuffered.
    ///
    /// A reader that went away (`EPIPE` on stdout: `aftransfer list --json | head`) ends the
    /// process by SIGPIPE, as it ends any other command of a pipeline; another error on stdout is
    /// kept for the exit status, and the rest of the output is not written.
    static func write(bytes: UnsafeRawBufferPointer, to stream: Stream) {
        guard let base = bytes.baseAddress else { return }
        if stream == .stdout, stdoutClosed, stdoutError == nil { stdoutError = EBADF }
        if stream == .stdout, stdoutError != nil { return }
        var offset = 0
        while offset < bytes.count {
            let n = Glibc.write(stream.fd, base + offset, bytes.count - offset)
            if n < 0 {
                if errno == EINTR || errno == EAGAIN { continue }
                guard stream == .stdout else { return }  // stderr: nowhere left to say it
                if errno == EPIPE {
                    signal(SIGPIPE, SIG_DFL)
                    raise(SIGPIPE)
                }
                stdoutError = errno
                return
            }
            offset += n
        }
    }
}
