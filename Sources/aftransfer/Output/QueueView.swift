import TransferCore

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
        let lines = Self.screen(jobs, gone: gone, columns: size.columns ?? 80, rows: size.rows ?? 25)
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
        let width = max(columns - 1, 20)
        let room = max(rows - 1, 1)
        let open = jobs.filter { !$0.state.isFinal && !gone.contains($0.id) }
        var lines: [String] = []
        if room > 1 {
            let jobRoom = room - 1
            let shown = open.count > jobRoom ? max(jobRoom - 1, 0) : open.count
            lines = open.prefix(shown).map { jobLine($0, columns: width) }
            if open.count > shown {
                lines.append(ProgressRenderer.truncate("… and \(open.count - shown) more", to: width))
            }
        }
        lines.append(ProgressRenderer.truncate(totalsLine(jobs, gone: gone), to: width))
        return lines
    }

    /// One job: `#12 big.iso              running   [=====>    ]  45%  12.3 MiB/27.0 MiB  4.5 MiB/s  ETA 3s`.
    static func jobLine(_ job: JobSnapshot, columns: Int) -> String {
        let head =
            pad("#\(job.id)", 6) + " " + pad(clip(JobText.name(job), nameWidth), nameWidth) + " "
            + pad(job.state.rawValue, stateWidth)
        let percent = JobText.fraction(job).map { leftPad(HumanFormat.percent($0), 4) } ?? "    "
        let amount = HumanFormat.bytes(job.bytes) + (job.total.map { "/" + HumanFormat.bytes($0) } ?? "")
        let rate = job.state == .running ? HumanFormat.rate(job.rate) : "-"
        let eta = job.state == .running ? "ETA " + HumanFormat.duration(job.eta) : ""
        let tail = "  " + percent + "  " + leftPad(amount, 21) + "  " + leftPad(rate, 12) + "  " + eta
        let free = columns - head.count - tail.count - 3
        if free >= 5 { return head + " [" + bar(job, width: min(free, 30)) + "]" + tail }
        // Narrow (80 columns): no column padding, and the name gives way, so that the bar, the
        // bytes, the rate and the ETA still fit (SPEC: id, name, state, bar, bytes, rate, ETA).
        let id = "#\(job.id) "
        let state = " " + pad(job.state.rawValue, stateWidth)
        let compact = " " + percent + " " + amount + " " + rate + (eta.isEmpty ? "" : " " + eta)
        let nameRoom = columns - id.count - state.count - compact.count - 3 - compactBarWidth
        let name = pad(clip(JobText.name(job), min(max(nameRoom, 6), nameWidth)), min(max(nameRoom, 6), nameWidth))
        let barRoom = columns - id.count - name.count - state.count - compact.count - 3
        guard barRoom >= 5 else { return ProgressRenderer.truncate(head + tail, to: columns) }
        return ProgressRenderer.truncate(
            id + name + state + " [" + bar(job, width: min(barRoom, 30)) + "]" + compact, to: columns)
    }

    /// The bar a narrow line keeps at least, before the name is cut shorter.
    static let compactBarWidth = 10

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
        let bytes = present.reduce(Int64(0)) { $0 + $1.bytes }
        let totals = present.compactMap(\.total)
        let total: Int64? = totals.count == present.count ? totals.reduce(0, +) : nil
        let rate = present.filter { $0.state == .running }.reduce(0.0) { $0 + $1.rate }
        var eta: Double?
        if let total, rate > 0 { eta = Double(max(0, total - bytes)) / rate }
        let amount = HumanFormat.bytes(bytes) + (total.map { "/" + HumanFormat.bytes($0) } ?? "")
        let what = counts.isEmpty ? "none" : counts.joined(separator: ", ")
        return "Total: \(present.count) jobs (\(what))  \(amount)  \(HumanFormat.rate(rate))  ETA "
            + HumanFormat.duration(present.contains { !$0.state.isFinal } ? eta : 0)
    }

    private static func pad(_ text: String, _ width: Int) -> String {
        text.count < width ? text + String(repeating: " ", count: width - text.count) : text
    }

    private static func leftPad(_ text: String, _ width: Int) -> String {
        text.count < width ? String(repeating: " ", count: width - text.count) + text : text
    }

    private static func clip(_ text: String, _ width: Int) -> String {
        text.count <= width ? text : String(text.prefix(width - 1)) + "…"
    }

}
