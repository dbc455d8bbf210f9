import Foundation

/// The daemon-wide limits (SPEC "Bandwidth"): a fixed download limit or a daily schedule of them,
/// and an upload limit. Persisted by the store; applied by the engine's `BandwidthGovernor`.
public struct BandwidthLimits: Equatable, Sendable {
    /// The fixed download limit, bytes per second (nil: none, or the schedule decides).
    public var download: Int64?
    /// The upload limit, bytes per second (nil: none).
    public var upload: Int64?
    /// The daily timetable of download limits; when set it replaces ``download``.
    public var schedule: BandwidthSchedule?

    /// No limits.
    public init(download: Int64? = nil, upload: Int64? = nil, schedule: BandwidthSchedule? = nil) {
        self.download = download
        self.upload = upload
        self.schedule = schedule
    }

    /// The download limit in force at `date` (local time in `timeZone`).
    public func downloadRate(at date: Date, timeZone: TimeZone = .current) -> Int64? {
        if let schedule { return schedule.rate(at: date, timeZone: timeZone) }
        return download
    }

    /// Applies a `daemon.limits` change: `--download` sets a fixed limit and clears a schedule;
    /// `--schedule` replaces the fixed download limit (`off` clears it); `--upload` sets the
    /// upload limit. Values are as the CLI options take them (`2M`, `off`).
    /// - Parameter name: how a refusal spells a param: the RPC's name (`download`), or the CLI's
    ///   option (`--download`).
    /// - Throws: ``TransferError`` `invalid_request` for a malformed rate or schedule, its message
    ///   naming the value it is about (`download: …`); nothing is changed then: the caller keeps
    ///   the old value.
    public func changed(
        download: String?, upload: String?, schedule: String?, naming name: (String) -> String = { $0 }
    ) throws -> BandwidthLimits {
        var next = self
        if download != nil, let schedule, schedule.trimmingCharacters(in: .whitespaces).lowercased() != "off" {
            // Each would clear the other (SPEC): which one was meant is not for the daemon to guess.
            throw TransferError(
                .invalidRequest,
                "\(name("download")) and \(name("schedule")) both set the download limit: give one of them")
        }
        if let download {
            next.download = try Self.rate(download, param: name("download"))
            next.schedule = nil
        }
        if let upload { next.upload = try Self.rate(upload, param: name("upload")) }
        if let schedule {
            if schedule.trimmingCharacters(in: .whitespaces).lowercased() == "off" {
                next.schedule = nil
            } else {
                switch BandwidthSchedule.parsed(schedule) {
                case .success(let s):
                    next.schedule = s
                case .failure(let refusal):
                    throw TransferError(
                        .invalidRequest,
                        "\(name("schedule")): \(refusal.reason) (a schedule is 'HH:MM,RATE' entries): \(schedule)")
                }
                next.download = nil
            }
        }
        return next
    }

    /// A RATE or `off` (nil).
    static func rate(_ text: String, param: String) throws -> Int64? {
        if text.trimmingCharacters(in: .whitespaces).lowercased() == "off" { return nil }
        guard let r = RateParser.parse(text) else {
            throw TransferError(.invalidRequest, "\(param): not a rate (like 500K or 2M) or off: \(text)")
        }
        return r
    }
}

/// The limits in force now (`limit --json`, the result of `daemon.limits`): bytes per second,
/// null for none; `schedule` the timetable's text or null.
public struct LimitsInForce: Codable, Equatable, Sendable {
    /// The download limit in force now.
    public var download: Int64?
    /// The upload limit.
    public var upload: Int64?
    /// The daily schedule of download limits, or nil.
    public var schedule: String?

    /// Creates the value.
    public init(download: Int64?, upload: Int64?, schedule: String?) {
        self.download = download
        self.upload = upload
        self.schedule = schedule
    }

    /// Encodes nulls explicitly (the SPEC's shape has every key).
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encode(download, forKey: .download)
        try c.encode(upload, forKey: .upload)
        try c.encode(schedule, forKey: .schedule)
    }

    enum CodingKeys: String, CodingKey { case download, upload, schedule }
}
