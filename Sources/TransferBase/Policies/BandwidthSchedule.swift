import Foundation

/// A daily timetable of download limits (SPEC "Bandwidth", `--schedule '08:00,512K 19:00,off'`):
/// from each time of day on, that limit, until the next entry; before the day's first entry the
/// day before's last one applies. Times are local time (the time zone is passed in, so tests
/// inject the clock). A pure value.
public struct BandwidthSchedule: Equatable, Sendable {
    /// One entry: from `minute` (of the day, 0–1439) on, `rate` bytes per second (nil: no limit).
    public struct Entry: Equatable, Sendable {
        /// Minutes after midnight.
        public var minute: Int
        /// Bytes per second; nil for `off`.
        public var rate: Int64?
        /// The rate as written (`512K`, `off`).
        public var rateText: String
    }

    /// The entries, sorted by time (at least one, no two at the same time).
    public let entries: [Entry]

    /// Parses `HH:MM,RATE` entries separated by white space (RATE as `--limit-rate`, or `off`).
    /// - Returns: nil for anything malformed (no entries, a bad time or rate, a repeated time).
    public static func parse(_ text: String) -> BandwidthSchedule? {
        if case .success(let s) = parsed(text) { return s }
        return nil
    }

    /// Parses as ``parse(_:)``, or says what is wrong (`"08:00" is given twice`), for a refusal.
    public static func parsed(_ text: String) -> Result<BandwidthSchedule, Refusal> {
        let words = text.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" })
        guard !words.isEmpty else { return .failure(Refusal(reason: "no entries")) }
        var entries: [Entry] = []
        for word in words {
            let halves = word.split(separator: ",", omittingEmptySubsequences: false)
            guard halves.count == 2 else { return .failure(Refusal(reason: "\"\(word)\" is not HH:MM,RATE")) }
            guard let minute = parseTime(halves[0]) else {
                return .failure(Refusal(reason: "\"\(halves[0])\" is not a time from 00:00 to 23:59"))
            }
            let rateText = String(halves[1])
            let rate: Int64?
            if rateText.lowercased() == "off" {
                rate = nil
            } else {
                guard let r = RateParser.parse(rateText) else {
                    return .failure(Refusal(reason: "\"\(rateText)\" is not a rate (or off)"))
                }
                rate = r
            }
            guard !entries.contains(where: { $0.minute == minute }) else {
                return .failure(Refusal(reason: "\"\(halves[0])\" is given twice"))
            }
            entries.append(Entry(minute: minute, rate: rate, rateText: rateText))
        }
        return .success(BandwidthSchedule(entries: entries.sorted { $0.minute < $1.minute }))
    }

    /// Why a schedule was refused.
    public struct Refusal: Error, Equatable {
        /// What is wrong, for people.
        public var reason: String
    }

    private init(entries: [Entry]) { self.entries = entries }

    /// `HH:MM` (one or two digit hours, two digit minutes) → minutes after midnight.
    private static func parseTime(_ s: Substring) -> Int? {
        let parts = s.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, (1...2).contains(parts[0].count), parts[1].count == 2,
            parts.allSatisfy({ $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } }),
            let h = Int(parts[0]), let m = Int(parts[1]), h < 24, m < 60
        else { return nil }
        return h * 60 + m
    }

    /// The schedule as text, entries in time order (`08:00,512K 19:00,off`).
    public var text: String {
        entries.map { String(format: "%02d:%02d,%@", $0.minute / 60, $0.minute % 60, $0.rateText) }
            .joined(separator: " ")
    }

    /// The entry in force at `date` in `timeZone`.
    public func entry(at date: Date, timeZone: TimeZone = .current) -> Entry {
        let minute = Self.minuteOfDay(date, timeZone: timeZone)
        return entries.last(where: { $0.minute <= minute }) ?? entries[entries.count - 1]
    }

    /// The limit in force at `date` (bytes per second; nil: none).
    public func rate(at date: Date, timeZone: TimeZone = .current) -> Int64? {
        entry(at: date, timeZone: timeZone).rate
    }

    /// Minutes after local midnight of `date`.
    static func minuteOfDay(_ date: Date, timeZone: TimeZone) -> Int {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone
        let c = calendar.dateComponents([.hour, .minute], from: date)
        return (c.hour ?? 0) * 60 + (c.minute ?? 0)
    }
}
