import TransferBase

/// `watch` with no ids on a terminal: the whole queue as a screen, redrawn in place. Every
/// unfinished job one line (id, name, state, bar, bytes, rate, ETA), then a totals line; fitted to
/// the terminal's width and height ("… and N more" when the jobs do not fit).
final class QueueView {
    /// The most redraws a second.
    static let maximumRedrawsPerSecond = 4.0
    /// Width of the name column.
    static let nameWidth = 20
    /// Width of the state column (`waiting`, `completed`).
    static let stateWidth = 9

    private let terminalSize: () -> (columns: Int?, rows: Int?)
    private let write: (String) -> Void
    private let clock: () -> Double
    private var drawnLines = 0
    /// The widest figures drawn so far: a screen keeps its layout while a job's bytes grow by a
    /// digit (`9.7 MiB` to `10.7 MiB`), rather than losing its bars for a redraw.
    private var widestFigures = FigureWidths([])
    private var lastDraw = -Double.infinity

    /// Creates a view that draws into `write`.
    /// - Parameters:
    ///   - terminalSize: the terminal's columns and rows now (nil: 80 × 25).
    ///   - write: receives the text as it goes to the terminal.
    ///   - clock: monotonic seconds.
    init(
        terminalSize: @escaping () -> (columns: Int?, rows: Int?), write: @escaping (String) -> Void,
        clock: @escaping () -> Double = ProgressRenderer.now
    ) {
        self.terminalSize = terminalSize
        self.write = write
        self.clock = clock
    }

    /// A view of stdout.
    convenience init(stream: Console.Stream) {
        self.init(terminalSize: { (stream.columns, stream.rows) }, write: { Console.write($0, to: stream) })
    }

    /// Redraws (at most ``maximumRedrawsPerSecond`` times a second unless `force`).
    func update(_ jobs: [JobSnapshot], gone: Set<Int64> = [], force: Bool = false) {
        let now = clock()
        guard force || now - lastDraw >= 1 / Self.maximumRedrawsPerSecond else { return }
        lastDraw = now
        let size = terminalSize()
        let lines = Self.screen(
            jobs, gone: gone, columns: size.columns ?? 80, rows: size.rows ?? 25, figuresAtLeast: &widestFigures)
        write(ProgressRenderer.redraw(lines, over: drawnLines))
        drawnLines = lines.count
    }

    /// Draws the last state and leaves the cursor on a fresh line.
    func finish(_ jobs: [JobSnapshot], gone: Set<Int64> = []) {
        update(jobs, gone: gone, force: true)
        abandon()
    }

    /// Leaves the cursor on a fresh line (after an error or an interrupt).
    func abandon() {
        guard drawnLines > 0 else { return }
        write("\n")
        drawnLines = 0
    }

    // MARK: - Layout

    /// The screen's lines: the unfinished jobs that fit, "… and N more" when some do not, and the
    /// totals line; none wider than `columns - 1`, at most `rows - 1` in all.
    static func screen(_ jobs: [JobSnapshot], gone: Set<Int64>, columns: Int, rows: Int) -> [String] {
        var figures = FigureWidths([])
        return screen(jobs, gone: gone, columns: columns, rows: rows, figuresAtLeast: &figures)
    }

    /// The screen, its figures padded to at least `figuresAtLeast`, which it widens.
    static func screen(
        _ jobs: [JobSnapshot], gone: Set<Int64>, columns: Int, rows: Int, figuresAtLeast: inout FigureWidths
    ) -> [String] {
        let width = max(columns - 1, 1)
        let room = max(rows - 1, 1)
        let open = jobs.filter { !$0.state.isFinal && !gone.contains($0.id) }
        var lines: [String] = []
        if room > 1 {
            let jobRoom = room - 1
            let shown = open.count > jobRoom ? max(jobRoom - 1, 0) : open.count
            // One layout for the screen: the ids padded alike, the names cut alike, so that the
            // states and bars of a narrow screen form columns.
            let visible = Array(open.prefix(shown))
            let idWidth = visible.map { TerminalColumns.width("#\($0.id)") }.max() ?? 0
            figuresAtLeast.widen(to: FigureWidths(visible))
            let figures = figuresAtLeast
            let nameRoom = visible.map { compactNameRoom($0, columns: width, idWidth: idWidth, figures: figures) }.min()
            lines = visible.map {
                jobLine($0, columns: width, idWidth: idWidth, nameRoom: nameRoom, figures: figures)
            }
            if open.count > shown {
                lines.append(ProgressRenderer.truncate("… and \(open.count - shown) more", to: width))
            }
        }
        lines.append(ProgressRenderer.truncate(totalsLine(jobs, gone: gone), to: width))
        return lines
    }

    /// One job: `#12 big.iso              running   [=====>    ]  45%  12.3 MiB/27.0 MiB  4.5 MiB/s  ETA 3s`.
    /// - Parameters:
    ///   - idWidth: the width the id is padded to on a narrow line (the screen's widest id).
    ///   - nameRoom: the columns the name gets on a narrow line (the same for the whole screen);
    ///     nil: what this line leaves.
    ///   - figures: the widths a narrow line pads its bytes, rate and ETA to (the screen's widest,
    ///     so that every line's bar has one width and its figures form columns); nil: its own.
    static func jobLine(
        _ job: JobSnapshot, columns: Int, idWidth: Int = 0, nameRoom common: Int? = nil, figures: FigureWidths? = nil
    ) -> String {
        let head =
            pad("#\(job.id)", 6) + " " + pad(clip(JobText.name(job), nameWidth), nameWidth) + " "
            + pad(job.state.rawValue, stateWidth)
        let parts = Parts(job)
        // The ETA column has one width for every line (blank when not running), so that every
        // line of a screen takes the same layout below.
        let eta = parts.duration.map { "ETA " + pad($0, 6) } ?? String(repeating: " ", count: 10)
        let tail = "  " + parts.percent + "  " + leftPad(parts.amount, 21) + "  " + leftPad(parts.rate, 12) + "  " + eta
        let free = columns - TerminalColumns.width(head) - TerminalColumns.width(tail) - 3
        if free >= 5 { return head + " [" + bar(job, width: min(free, 30)) + "]" + tail }
        // Narrow (80 columns): no column padding, and the name gives way, so that the bar, the
        // bytes, the rate and the ETA still fit (SPEC: id, name, state, bar, bytes, rate, ETA);
        // narrower still, the bar goes, then the end of the line is cut.
        let id = pad("#\(job.id)", idWidth) + " "
        let state = " " + pad(job.state.rawValue, stateWidth)
        let figures = figures ?? FigureWidths([job])
        let compact = parts.compact(figures)
        let fixed = TerminalColumns.width(id) + TerminalColumns.width(state) + TerminalColumns.width(compact)
        let nameRoom = common ?? compactNameRoom(job, columns: columns, idWidth: idWidth, figures: figures)
        let name = pad(clip(JobText.name(job), nameRoom), nameRoom)
        let barRoom = columns - fixed - TerminalColumns.width(name) - 3
        guard barRoom >= 5 else {
            // No bar: the columns kept while the figures fit; then the state unpadded and the
            // name in what is left (6 columns at least), the end of the line cut.
            let aligned = id + name + state + compact
            if TerminalColumns.width(aligned) <= columns { return aligned }
            let plainState = " " + job.state.rawValue
            let tight = parts.tight
            let room = columns - TerminalColumns.width(id) - TerminalColumns.width(plainState + tight)
            let shortName = clip(JobText.name(job), min(max(room, 6), nameWidth))
            return ProgressRenderer.truncate(id + shortName + plainState + tight, to: columns)
        }
        return ProgressRenderer.truncate(
            id + name + state + " [" + bar(job, width: min(barRoom, 30)) + "]" + compact, to: columns)
    }

    /// The bar a narrow line keeps at least, before the name is cut shorter.
    static let compactBarWidth = 10

    /// The columns a narrow line leaves the name (6 to ``nameWidth``).
    static func compactNameRoom(_ job: JobSnapshot, columns: Int, idWidth: Int, figures: FigureWidths) -> Int {
        let id = TerminalColumns.width(pad("#\(job.id)", idWidth) + " ")
        let fixed = id + 1 + stateWidth + TerminalColumns.width(Parts(job).compact(figures))
        return min(max(columns - fixed - 3 - compactBarWidth, 6), nameWidth)
    }

    /// The widths of a narrow screen's figures: the widest bytes, rate and ETA of its lines.
    struct FigureWidths {
        var amount = 0
        var rate = 0
        var duration = 0

        /// Each width the larger of this one's and `other`'s.
        mutating func widen(to other: FigureWidths) {
            amount = max(amount, other.amount)
            rate = max(rate, other.rate)
            duration = max(duration, other.duration)
        }

        init(_ jobs: [JobSnapshot]) {
            for job in jobs {
                let parts = Parts(job)
                // Room for the bytes to reach the total (`19.1 MiB/19.1 MiB`), so that a job's
                // progress does not move the screen's columns.
                let whole = job.total.map { HumanFormat.bytes($0) + "/" + HumanFormat.bytes($0) } ?? ""
                amount = max(amount, TerminalColumns.width(parts.amount), TerminalColumns.width(whole))
                rate = max(rate, TerminalColumns.width(parts.rate))
                duration = max(duration, parts.duration.map(TerminalColumns.width) ?? 0)
            }
        }
    }

    /// A job's figures as a line shows them.
    private struct Parts {
        let percent: String
        let amount: String
        let rate: String
        let duration: String?

        init(_ job: JobSnapshot) {
            percent = JobText.fraction(job).map { QueueView.leftPad(HumanFormat.percent($0), 4) } ?? "    "
            amount = HumanFormat.bytes(job.bytes) + (job.total.map { "/" + HumanFormat.bytes($0) } ?? "")
            rate = job.state == .running ? HumanFormat.rate(job.rate) : "-"
            duration = job.state == .running ? HumanFormat.duration(job.eta) : nil
        }

        /// ` 45% 12.3 MiB/27.0 MiB 4.5 MiB/s ETA 3s`, for a narrow line: each figure padded to the
        /// screen's widest (`widths`), the ETA's room blank on a line without one.
        func compact(_ widths: FigureWidths) -> String {
            let eta =
                widths.duration == 0
                ? ""
                : duration.map { " ETA " + QueueView.pad($0, widths.duration) }
                    ?? String(repeating: " ", count: 5 + widths.duration)
            return " " + percent + " " + QueueView.leftPad(amount, widths.amount) + " "
                + QueueView.leftPad(rate, widths.rate) + eta
        }

        /// The same with no padding at all, for the narrowest.
        var tight: String {
            let figures =
                [percent.trimmingCharacters(in: .whitespaces), amount, rate] + (duration.map { ["ETA " + $0] } ?? [])
            return figures.filter { !$0.isEmpty }.map { " " + $0 }.joined()
        }
    }

    private static func bar(_ job: JobSnapshot, width: Int) -> String {
        guard let fraction = JobText.fraction(job) else { return String(repeating: " ", count: width) }
        return ProgressRenderer.bar(fraction, width: width)
    }

    /// `Total: 12 jobs: 3 running, 8 queued, 1 done  1.2 GiB/3.4 GiB  8.8 MiB/s  ETA 4m12s`.
    static func totalsLine(_ jobs: [JobSnapshot], gone: Set<Int64>) -> String {
        let present = jobs.filter { !gone.contains($0.id) }
        var counts: [String] = []
        for state in [TransferState.running, .waiting, .queued, .paused] {
            let n = present.filter { $0.state == state }.count
            if n > 0 { counts.append("\(n) \(state.rawValue)") }
        }
        let ended = present.filter { $0.state.isFinal }.count
        if ended > 0 { counts.append("\(ended) ended") }
        // The amount over the jobs that will still come to their end: a failed or cancelled job's
        // missing bytes never come (they kept the total, and the ETA, from ever being reached).
        let counted = present.filter { $0.state != .failed && $0.state != .cancelled }
        let bytes = counted.reduce(Int64(0)) { $0 + $1.bytes }
        let totals = counted.compactMap(\.total)
        let total: Int64? = totals.count == counted.count ? totals.reduce(0, +) : nil
        let rate = present.filter { $0.state == .running }.reduce(0.0) { $0 + $1.rate }
        var eta: Double?
        if let total, rate > 0 { eta = Double(max(0, total - bytes)) / rate }
        let amount = HumanFormat.bytes(bytes) + (total.map { "/" + HumanFormat.bytes($0) } ?? "")
        let what = counts.isEmpty ? "none" : counts.joined(separator: ", ")
        return
            "Total: \(present.count) job\(present.count == 1 ? "" : "s") (\(what))  \(amount)  \(HumanFormat.rate(rate))  ETA "
            + HumanFormat.duration(present.contains { !$0.state.isFinal } ? eta : 0)
    }

    private static func pad(_ text: String, _ width: Int) -> String { TerminalColumns.pad(text, to: width) }

    private static func leftPad(_ text: String, _ width: Int) -> String { TerminalColumns.leftPad(text, to: width) }

    private static func clip(_ text: String, _ width: Int) -> String { TerminalColumns.clip(text, to: width) }

}
