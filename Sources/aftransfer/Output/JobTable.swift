import TransferBase

/// The `list` table for people: id, state, percent, bytes/total, rate, and where the data goes.
enum JobTable {
    /// The table's lines, a header first; no lines for no jobs.
    static func lines(_ jobs: [JobSnapshot]) -> [String] {
        guard !jobs.isEmpty else { return [] }
        var rows = [["ID", "STATE", "DONE", "BYTES", "RATE", "TARGET"]]
        for job in jobs {
            rows.append([
                String(job.id),
                job.state.rawValue,
                HumanFormat.percent(JobText.fraction(job)),
                JobText.amount(job),
                job.state == .running ? HumanFormat.rate(job.rate) : "-",
                JobText.target(job),
            ])
        }
        let columns = rows[0].count
        var widths = [Int](repeating: 0, count: columns)
        for row in rows {
            for (i, cell) in row.enumerated() { widths[i] = max(widths[i], cell.count) }
        }
        // Numbers right-aligned, words left-aligned; the last column is not padded.
        let rightAligned: Set<Int> = [0, 2, 3, 4]
        return rows.map { row in
            row.enumerated().map { i, cell in
                if i == columns - 1 { return cell }
                let padding = String(repeating: " ", count: widths[i] - cell.count)
                return rightAligned.contains(i) ? padding + cell : cell + padding
            }.joined(separator: "  ")
        }
    }
}
