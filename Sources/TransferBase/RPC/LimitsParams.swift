/// The params of `daemon.limits`.
public struct LimitsParams: Codable, Sendable, Equatable {
    /// `--download RATE|off`.
    public var download: String?
    /// `--upload RATE|off`.
    public var upload: String?
    /// `--schedule 'HH:MM,RATE ...'|off`.
    public var schedule: String?

    /// Creates the params.
    public init(download: String? = nil, upload: String? = nil, schedule: String? = nil) {
        self.download = download
        self.upload = upload
        self.schedule = schedule
    }

    enum CodingKeys: String, CodingKey { case download, upload, schedule }

    /// Accepts a rate as a string (`2M`, `off`) or a number of bytes per second.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        func rate(_ key: CodingKeys) throws -> String? {
            if let n = try? c.decodeIfPresent(Int64.self, forKey: key) { return String(n) }
            return try c.decodeIfPresent(String.self, forKey: key)
        }
        download = try rate(.download)
        upload = try rate(.upload)
        schedule = try c.decodeIfPresent(String.self, forKey: .schedule)
    }

    /// Writes only the keys that are set.
    public func encode(to encoder: Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        try c.encodeIfPresent(download, forKey: .download)
        try c.encodeIfPresent(upload, forKey: .upload)
        try c.encodeIfPresent(schedule, forKey: .schedule)
    }
}
