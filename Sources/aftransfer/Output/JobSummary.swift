import Foundation
import TransferBase

/// The `status` summary for people: one field a line, then the attempts' timelines.
enum JobSummary {
    /// The summary's lines, each ``HumanFormat/printable(_:)`` (the response body, the hook's
    /// output and the errors come from outside).
    /// - Parameters:
    ///   - job: the job.
    ///   - now: the time a retry timer counts from; the current time by default.
    ///   - segments: a segmented download's ranges (`transfer.segments`), shown under "Ranges".
    static func lines(_ job: JobSnapshot, now: Date = Date(), segments: [SegmentProgress] = []) -> [String] {
        var fields: [(String, String)] = [
            ("State", job.state.rawValue),
            ("URL", job.url),
            ("Method", job.method),
        ]
        if job.kind == .download {
            fields.append(("Destination", job.destination ?? "(not known yet)"))
        } else {
            fields.append(("Source", job.destination ?? "(multipart form)"))
        }
        var progress = JobText.amount(job) + " (" + HumanFormat.percent(JobText.fraction(job)) + ")"
        if job.state == .running {
            progress += ", " + HumanFormat.rate(job.rate) + ", ETA " + HumanFormat.duration(job.eta)
        }
        fields.append(("Progress", progress))
        if job.state == .running && job.kind == .download {
            fields.append(("Connections", String(job.connections ?? 0)))
        }
        fields.append(("Attempts", String(job.attempts)))
        if let status = job.httpStatus { fields.append(("HTTP status", String(status))) }
        if let error = job.error {
            fields.append(("Error", (JobText.error(job) ?? "") + (error.retryable ? " (retryable)" : "")))
        }
        if let waiting = JobText.waiting(job, now: now) {
            fields.append(("Waiting", waiting))
            if let next = job.nextRetryAt { fields.append(("Next retry", next)) }
        }
        if job.insecure { fields.append(("TLS", "NOT VERIFIED (--insecure)")) }
        if let sha256 = job.sha256 { fields.append(("SHA-256", sha256)) }
        fields.append(("Created", job.createdAt))
        fields.append(("Updated", job.updatedAt))
        if let completed = job.completedAt { fields.append(("Completed", completed)) }
        if let response = job.response {
            // The body is kept as text, each byte that is not UTF-8 as U+FFFD: counted in
            // characters, not in the 3 bytes of each replacement (2048 "bytes" for 1024 sent).
            fields.append(("Response", "HTTP \(response.status), \(response.body.count) characters of its body kept"))
        }
        if let url = job.uploadUrl {
            fields.append(("Upload URL", url + (job.resumable.map { " (\($0.rawValue))" } ?? "")))
        }
        if let hook = job.hook {
            let first =
                hook.output.split(separator: "\n", omittingEmptySubsequences: true).first.map { ": \($0)" } ?? ""
            fields.append(("On-end hook", "exit \(hook.exitStatus)\(first)"))
        }

        let width = fields.map(\.0.count).max() ?? 0
        var lines = ["Job \(job.id) (\(job.kind))"]
        for (name, value) in fields {
            lines.append("  " + name + ":" + String(repeating: " ", count: width - name.count + 1) + value)
        }
        if !segments.isEmpty {
            lines.append("  Ranges:")
            for s in segments { lines.append("    " + describe(s)) }
        }
        if !job.history.isEmpty {
            lines.append("  History:")
            for attempt in job.history { lines.append("    " + describe(attempt)) }
        }
        if let response = job.response, !response.body.isEmpty {
            lines.append("  Response body:")
            for line in response.body.split(separator: "\n", omittingEmptySubsequences: false).prefix(20) {
                lines.append("    " + line)
            }
        }
        return lines.map { HumanFormat.printable($0) }
    }

    /// One range of a segmented download: `bytes 0-4194303  1.5 MiB of 4.0 MiB (37%)`.
    static func describe(_ segment: SegmentProgress) -> String {
        let size = segment.end - segment.start
        let fraction = size > 0 ? Double(segment.bytes) / Double(size) : 1
        return "bytes \(segment.start)-\(segment.end - 1)  " + HumanFormat.bytes(segment.bytes) + " of "
            + HumanFormat.bytes(size) + " (" + HumanFormat.percent(fraction) + ")"
            + (segment.bytes >= size ? "  done" : "")
    }

    /// One attempt: `#1 2026-… → 2026-…  HTTP 200  1.0 MiB  dns 1ms  connect 2ms  …`.
    static func describe(_ attempt: AttemptRecord) -> String {
        var parts = ["#\(attempt.attempt)", attempt.startedAt + " → " + (attempt.endedAt ?? "…")]
        if let status = attempt.httpStatus { parts.append("HTTP \(status)") }
        parts.append(HumanFormat.bytes(attempt.bytes))
        let timings: [(String, Double?)] = [
            ("dns", attempt.nameLookup), ("connect", attempt.connect), ("tls", attempt.tls),
            ("first byte", attempt.firstByte), ("total", attempt.total),
        ]
        for case (let name, let value?) in timings { parts.append(name + " " + HumanFormat.timing(value)) }
        if let error = attempt.error { parts.append(error.code.rawValue + ": " + error.message) }
        return parts.joined(separator: "  ")
    }
}
