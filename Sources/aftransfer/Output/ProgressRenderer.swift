import Foundation
import TransferBase

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Draws the progress of a few jobs: on a terminal, one bar a job redrawn in place (at most
/// ``maximumRedrawsPerSecond`` times a second); elsewhere, plain lines (one per state change, and
/// at most one a second per job while bytes flow).
final class ProgressRenderer {
    /// How to draw.
    enum Style {
        /// Bars redrawn in place with `\r` and cursor moves (terminals).
        case bars
        /// Appended lines (pipes and files).
        case lines
    }

    /// The most redraws a second on a terminal.
    static let maximumRedrawsPerSecond = 5.0
    /// The least time between two plain progress lines of one job, in seconds.
    static let lineInterval = 1.0

    /// How to draw: bars on a terminal, plain lines elsewhere.
    let style: Style
    /// Whether bars end with the file name (not needed for one job the user just named).
    private let showNames: Bool
    /// The terminal's size now (it may change between redraws), nil where unknown.
    private let terminalSize: () -> (columns: Int?, rows: Int?)
    /// Where the text goes.
    private let write: (String) -> Void
    /// Monotonic seconds, for the redraw and line rates.
    private let clock: () -> Double
    private var drawnLines = 0
    private var lastDraw = 0.0
    private var lastStates: [Int64: Shown] = [:]
    private var lastLine: [Int64: (time: Double, bytes: Int64)] = [:]

    /// Creates a renderer for `stream`, drawing bars when it is a terminal.
    /// - Parameters:
    ///   - stream: where to draw.
    ///   - showNames: whether each bar ends with the job's file name.
    convenience init(stream: Console.Stream, showNames: Bool = true) {
        self.init(
            style: stream.isTerminal ? .bars : .lines, showNames: showNames,
            terminalSize: { (stream.columns, stream.rows) }, write: { Console.write($0, to: stream) })
    }

    /// Creates a renderer that draws with `style` into `write`: tests use it without a terminal.
    /// - Parameters:
    ///   - style: bars or plain lines.
    ///   - showNames: whether each bar ends with the job's file name.
    ///   - terminalSize: the terminal's columns and rows now (nil: 80 × 25).
    ///   - write: receives the text to print, as it would go to the stream.
    ///   - clock: monotonic seconds; the system's by default.
    init(
        style: Style, showNames: Bool = true, terminalSize: @escaping () -> (columns: Int?, rows: Int?),
        write: @escaping (String) -> Void, clock: @escaping () -> Double = ProgressRenderer.now
    ) {
        self.style = style
        self.showNames = showNames
        self.terminalSize = terminalSize
        self.write = write
        self.clock = clock
    }

    /// Shows the jobs' current state.
    /// - Parameters:
    ///   - jobs: the jobs, in display order.
    ///   - gone: ids of jobs removed while followed.
    ///   - force: redraw even if the last redraw was very recent.
    func update(_ jobs: [JobSnapshot], gone: Set<Int64> = [], force: Bool = false) {
        let now = clock()
        // Compared job by job in place: a dictionary of every job's state built on each update
        // made following 100,000 jobs cost O(jobs) allocations ten times a second.
        switch style {
        case .bars:
            var stateChanged = jobs.count != lastStates.count
            if !stateChanged {
                for job in jobs where lastStates[job.id] != Self.shown(job, gone) {
                    stateChanged = true
                    break
                }
            }
            guard force || stateChanged || now - lastDraw >= 1 / Self.maximumRedrawsPerSecond else { return }
            drawBars(jobs, gone: gone)
            if stateChanged {
                lastStates = Dictionary(uniqueKeysWithValues: jobs.map { ($0.id, Self.shown($0, gone)) })
            }
        case .lines:
            // One write for the lines of an update: a write each was a system call a line, two
            // for each of thousands of small files.
            var text = ""
            for job in jobs {
                let shown = Self.shown(job, gone)
                let changed = lastStates[job.id] != shown
                let moved =
                    job.state == .running
                    && lastLine[job.id].map { now - $0.time >= Self.lineInterval && $0.bytes != job.bytes } ?? true
                guard changed || moved else { continue }
                if changed { lastStates[job.id] = shown }
                lastLine[job.id] = (now, job.bytes)
                text += Self.plainLine(job, gone: gone.contains(job.id))
                text += "\n"
            }
            if !text.isEmpty { write(text) }
        }
        lastDraw = now
    }

    /// What a job shows as its state: its own, or removed.
    private enum Shown: Equatable {
        case state(TransferState)
        case removed
    }

    private static func shown(_ job: JobSnapshot, _ gone: Set<Int64>) -> Shown {
        gone.contains(job.id) ? .removed : .state(job.state)
    }

    /// Draws the final state and leaves the cursor on a fresh line.
    func finish(_ jobs: [JobSnapshot], gone: Set<Int64> = []) {
        update(jobs, gone: gone, force: true)
        if style == .bars, drawnLines > 0 {
            write("\n")
            drawnLines = 0
        }
    }

    /// Leaves the cursor on a fresh line after an error, so that its message starts a line.
    func abandon() {
        if style == .bars, drawnLines > 0 {
            write("\n")
            drawnLines = 0
        }
    }

    // MARK: - Bars

    private func drawBars(_ jobs: [JobSnapshot], gone: Set<Int64>) {
        let size = terminalSize()
        let columns = max((size.columns ?? 80) - 1, 1)
        let maxLines = max((size.rows ?? 25) - 1, 1)
        var lines = jobs.prefix(jobs.count > maxLines ? maxLines - 1 : maxLines).map {
            Self.barLine($0, gone: gone.contains($0.id), columns: columns, showName: showNames)
        }
        if jobs.count > lines.count { lines.append("… and \(jobs.count - lines.count) more") }

        write(Self.redraw(lines.map { Self.truncate($0, to: columns) }, over: drawnLines))
        drawnLines = lines.count
    }

    /// One job's bar: `#12 [=====>    ]  45%  12.3 MiB/27.0 MiB  4.5 MiB/s  ETA 3s  name`.
    static func barLine(_ job: JobSnapshot, gone: Bool, columns: Int, showName: Bool) -> String {
        let head = "#\(job.id) "
        let name = showName ? "  " + JobText.name(job) : ""
        guard !gone else { return head + "removed" + name }
        switch job.state {
        case .running:
            // Padded statistics (a redrawn bar does not jump) while they leave a bar of 10; then
            // unpadded; then no bar (the render cuts what still does not fit).
            var stats = statistics(job, aligned: true)
            let nameRoom = min(TerminalColumns.width(name), 22)
            var free = columns - TerminalColumns.width(head) - TerminalColumns.width(stats) - nameRoom - 2
            if free < 10 {
                stats = statistics(job)
                free = columns - TerminalColumns.width(head) - TerminalColumns.width(stats) - nameRoom - 2
            }
            if let fraction = JobText.fraction(job), free >= 5 {
                return head + "[" + Self.bar(fraction, width: min(free, 40)) + "]" + stats + name
            }
            return head + "running " + stats + name
        default:
            return head + stateText(job, gone: false) + name
        }
    }

    /// One job as a plain line: `12 running 45% 12.3 MiB/27.0 MiB 4.5 MiB/s ETA 3s name`.
    static func plainLine(_ job: JobSnapshot, gone: Bool) -> String {
        let name = "  " + JobText.name(job)
        if !gone, job.state == .running { return "\(job.id) running " + statistics(job) + name }
        return "\(job.id) " + stateText(job, gone: gone) + name
    }

    /// `  45%  12.3 MiB/27.0 MiB  4.5 MiB/s  ETA 3s` (the percent only when known), padded to
    /// fixed widths when `aligned` so that a redrawn bar does not jump.
    private static func statistics(_ job: JobSnapshot, aligned: Bool = false) -> String {
        func pad(_ text: String, _ width: Int) -> String {
            aligned && text.count < width ? String(repeating: " ", count: width - text.count) + text : text
        }
        var parts: [String] = []
        if let fraction = JobText.fraction(job) { parts.append(pad(HumanFormat.percent(fraction), 4)) }
        let amount = pad(HumanFormat.bytes(job.bytes), 10) + (job.total.map { "/" + HumanFormat.bytes($0) } ?? "")
        parts.append(amount)
        parts.append(pad(HumanFormat.rate(job.rate), 12))
        parts.append("ETA " + pad(HumanFormat.duration(job.eta), 5))
        return " " + parts.joined(separator: "  ")
    }

    /// A job that is not running: its state, what it has, and why it stopped or waits.
    private static func stateText(_ job: JobSnapshot, gone: Bool) -> String {
        if gone { return "removed" }
        switch job.state {
        case .completed:
            return "completed  " + HumanFormat.bytes(job.bytes)
        case .failed:
            return "failed  " + (JobText.error(job) ?? "")
        case .waiting:
            var text = "waiting (" + (JobText.waiting(job) ?? "retry") + ")  " + JobText.amount(job)
            if let error = JobText.error(job) { text += "  " + error }
            return text
        case .paused, .queued, .cancelled, .running:
            if job.bytes > 0 || job.total != nil { return job.state.rawValue + "  " + JobText.amount(job) }
            return job.state.rawValue
        }
    }

    /// `line`, cut to `columns` terminal columns with `…` when wider.
    static func truncate(_ line: String, to columns: Int) -> String {
        TerminalColumns.clip(line, to: max(columns, 1))
    }

    /// The filling of a bar `width` characters wide: `=====>    `.
    static func bar(_ fraction: Double, width: Int) -> String {
        let filled = Int((min(max(fraction, 0), 1) * Double(width)).rounded(.down))
        var bar = String(repeating: "=", count: filled)
        if filled < width { bar += ">" + String(repeating: " ", count: width - filled - 1) }
        return bar
    }

    /// The text that draws `lines` in place of the `drawn` lines drawn before (cursor up, each
    /// line cleared to its end, what is left below cleared).
    static func redraw(_ lines: [String], over drawn: Int) -> String {
        var text = "\r"
        if drawn > 1 { text += "\u{1B}[\(drawn - 1)A" }
        text += lines.map { $0 + "\u{1B}[K" }.joined(separator: "\n")
        if lines.count < drawn { text += "\u{1B}[J" }
        return text
    }

    /// Monotonic seconds (`CLOCK_MONOTONIC`).
    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
