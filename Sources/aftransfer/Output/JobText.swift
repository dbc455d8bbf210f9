import Foundation
import TransferBase

/// Short texts about a job, shared by the table, the status summary and the progress bars; text
/// that comes from outside (names, URLs, messages) is ``HumanFormat/printable(_:)``.
enum JobText {
    /// Where the job's data is: a download's destination (its URL until the name is known), an
    /// upload's URL.
    static func target(_ job: JobSnapshot) -> String {
        if job.kind == .download, let destination = job.destination { return HumanFormat.printable(destination) }
        return HumanFormat.printable(job.url)
    }

    /// The last path component of the target, for one-line displays.
    static func name(_ job: JobSnapshot) -> String {
        let name: String
        if job.kind == .download, let destination = job.destination {
            name = lastPathComponent(destination)
        } else if let url = URL(string: job.url), !url.lastPathComponent.isEmpty, url.lastPathComponent != "/" {
            name = url.lastPathComponent
        } else {
            name = job.url
        }
        return HumanFormat.printable(name)
    }

    /// `NSString`'s `lastPathComponent` of a file path, without bridging to Foundation (a line
    /// a job is drawn when thousands are followed): trailing slashes dropped, `/` stays `/`, more
    /// slashes alone give nothing. It splits at every `/` byte, where `NSString` would not split a
    /// `/` that a combining mark follows (one character to it).
    static func lastPathComponent(_ path: String) -> String {
        let slash = UInt8(ascii: "/")
        if path.utf8.count > 1, path.utf8.allSatisfy({ $0 == slash }) { return "" }
        var bytes = path.utf8[...]
        while bytes.count > 1, bytes.last == slash { bytes = bytes.dropLast() }
        guard bytes.count > 1, let last = bytes.lastIndex(of: slash) else { return String(Substring(bytes)) }
        return String(Substring(bytes[bytes.index(after: last)...]))
    }

    /// `12.3 MiB/27.0 MiB`, or `12.3 MiB` while the total is unknown.
    static func amount(_ job: JobSnapshot) -> String {
        guard let total = job.total else { return HumanFormat.bytes(job.bytes) }
        return HumanFormat.bytes(job.bytes) + "/" + HumanFormat.bytes(total)
    }

    /// The fraction done, from `fraction` or else bytes and total; nil while unknown.
    static func fraction(_ job: JobSnapshot) -> Double? {
        if let fraction = job.fraction { return fraction }
        if let total = job.total, total > 0 { return Double(job.bytes) / Double(total) }
        return nil
    }

    /// `code: message` of the job's error, or nil.
    static func error(_ job: JobSnapshot) -> String? {
        guard let error = job.error else { return nil }
        return error.code.rawValue + ": " + HumanFormat.printable(error.message)
    }

    /// Why and until when a waiting job waits: `offline`, `disk full` or `backoff, retry in 3s`; nil
    /// otherwise.
    /// - Parameters:
    ///   - job: the job.
    ///   - now: the time to count the retry from; the current time by default.
    static func waiting(_ job: JobSnapshot, now: Date = Date()) -> String? {
        guard job.state == .waiting else { return nil }
        switch job.waitReason {
        case .offline?:
            return "offline, until the network returns"
        case .disk?:
            return "disk full, until there is space (see the error)"
        case let reason?:
            if let next = job.nextRetryAt, let seconds = date(next)?.timeIntervalSince(now) {
                return reason.rawValue + ", retry in " + HumanFormat.duration(max(seconds, 0))
            }
            return reason.rawValue
        case nil:
            return nil
        }
    }

    /// Parses an RFC 3339 UTC time, with or without fractional seconds.
    static func date(_ timestamp: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        if let date = formatter.date(from: timestamp) { return date }
        formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
        return formatter.date(from: timestamp)
    }
}
