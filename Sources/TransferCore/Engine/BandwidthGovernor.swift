import Foundation

/// The daemon-wide limits at work (SPEC "Bandwidth"): one shared byte budget per direction that
/// every running transfer draws from, and the schedule that sets the download budget's rate.
///
/// Why pause/unpause on a shared budget rather than re-setting each handle's
/// `CURLOPT_MAX_RECV_SPEED_LARGE` to `rate / n`: libcurl 7.88's own limiter is unreliable under
/// the multi-socket API (see ``TransferTask/pace(_:)``), and an even split wastes the share of a
/// transfer that is slower than its share. One budget drawn by whoever has bytes is exact
/// (every byte is counted once, whatever the number of transfers) and cheap (a subtraction per
/// body callback; a paused transfer costs one loop timer). Loop-thread only.
final class BandwidthGovernor {
    /// The limits as set (persisted by the store).
    private(set) var limits: BandwidthLimits
    /// The download budget (its rate follows the schedule).
    let download = ByteBudget()
    /// The upload budget.
    let upload = ByteBudget()
    /// The wall clock (replaceable for tests).
    var clock: () -> Date = { Date() }
    /// The time zone of the schedule (local time).
    var timeZone: TimeZone = .current

    /// Starts with `limits`, in force at once.
    init(limits: BandwidthLimits = BandwidthLimits()) {
        self.limits = limits
        refresh(now: 0)
    }

    /// Replaces the limits; running transfers follow them from their next body callback.
    func set(_ limits: BandwidthLimits, now: UInt64) {
        self.limits = limits
        refresh(now: now)
    }

    /// Re-reads the schedule (called every second or so by the engine's tick).
    /// - Returns: whether a rate in force changed.
    @discardableResult
    func refresh(now: UInt64) -> Bool {
        let before = (download.rate, upload.rate)
        download.setRate(limits.downloadRate(at: clock(), timeZone: timeZone), now: now)
        upload.setRate(limits.upload, now: now)
        return before != (download.rate, upload.rate)
    }

    /// The max-min fair level of `limit` among transfers whose own limits are `caps` (nil: none):
    /// the level `s` with Σ min(cap, s) = `limit`. A transfer's share is the least of its own
    /// limit and `s` (what the byte budget's turns give it).
    static func fairLevel(of limit: Double, caps: [Double?]) -> Double {
        var rest = limit
        var uncapped = caps.count
        for cap in caps.compactMap({ $0 }).sorted() {
            let level = rest / Double(max(1, uncapped))
            if cap >= level { return level }
            rest -= cap
            uncapped -= 1
        }
        return uncapped > 0 ? rest / Double(uncapped) : limit
    }

    /// The limits in force now.
    var inForce: LimitsInForce {
        LimitsInForce(download: download.rate, upload: upload.rate, schedule: limits.schedule?.text)
    }
}

/// A byte budget shared by several transfers: tokens grow at `rate` per second up to a small
/// burst; a transfer may take bytes while the budget is not in debt (a callback's bytes may take
/// it below zero, repaid before anyone takes more).
///
/// Turns: once a transfer was refused, the budget's bytes go in turns, and the turn is the
/// waiting transfer's that has taken the fewest bytes (start-time fair queuing: each transfer's
/// tag is the virtual time at which its last take ended; the turn is the smallest tag, a newcomer
/// or one back from a pause starting at the current virtual time). Without turns, the one whose
/// timer fired first each time took every byte: a segmented download, whose connections share one
/// timer that it re-armed inside its own callbacks, left a one-connection job beside it nothing at
/// all. Turns by count rather than by bytes gave a transfer that reads 96 KiB at a time (its own
/// `--limit-rate` sizes its reads) a third of the budget beside one reading 256 KiB. Loop-thread
/// only.
final class ByteBudget {
    /// Who asks for bytes (a transfer, all its connections together).
    typealias Taker = ObjectIdentifier

    /// How long (ms) a refused transfer whose turn it is not waits before asking again, when the
    /// budget has bytes (the one whose turn it is is due at once).
    static let turnWait: UInt64 = 2
    /// A waiter not back this long (ms) after it was due is forgotten (it ended or went away).
    static let waiterGrace: UInt64 = 1000

    /// Transfers refused and not served since, by when they are due to ask again.
    private var waiters: [Taker: UInt64] = [:]
    /// Each transfer's tag: the virtual time (bytes) at which its last take ended.
    private var tags: [Taker: Double] = [:]
    /// The start tag of the last take.
    private var virtualTime = 0.0
    /// The smallest burst, in bytes.
    static let minimumBurst = 16 * 1024.0

    /// Bytes per second; nil: unlimited.
    private(set) var rate: Int64?
    private var tokens = 0.0
    private var last: UInt64 = 0

    /// The most tokens kept: an eighth of a second's worth (a short burst).
    private var capacity: Double { max(Self.minimumBurst, Double(rate ?? 0) / 8) }

    /// Changes the rate at loop time `now` (ms).
    func setRate(_ newRate: Int64?, now: UInt64) {
        refill(now: now)
        rate = newRate
        tokens = min(tokens, capacity)
    }

    private func refill(now: UInt64) {
        defer { last = now }
        guard let rate, now > last else { return }
        tokens = min(capacity, tokens + Double(rate) * Double(now - last) / 1000)
    }

    /// Where `taker`'s next take would start in virtual time.
    private func startTag(_ taker: Taker) -> Double { max(virtualTime, tags[taker] ?? virtualTime) }

    /// How long (ms) until `taker` may take bytes; 0 when it may now (then it should
    /// ``take(_:by:)``).
    func delay(now: UInt64, for taker: Taker) -> UInt64 {
        guard let rate else {
            // The body callbacks' path: no work when unlimited.
            if !waiters.isEmpty { waiters = [:] }
            if !tags.isEmpty { tags = [:] }
            return 0
        }
        refill(now: now)
        if tokens >= 0 {
            guard !waiters.isEmpty else { return 0 }
            waiters = waiters.filter { $0.value + Self.waiterGrace >= now }
            // The turn is among those that may take now: one held by its own `--limit-rate`
            // (``hold(_:until:)``) waits in line without holding up the others.
            let mine = startTag(taker)
            let ahead = waiters.contains { other, due in
                other != taker && due <= now && startTag(other) < mine
            }
            guard ahead else {
                waiters[taker] = nil
                return 0
            }
            waiters[taker] = now + Self.turnWait
            return Self.turnWait
        }
        let ms = max(1, UInt64((-tokens / Double(rate) * 1000).rounded(.up)))
        waiters[taker] = now + ms
        return ms
    }

    /// `taker` no longer asks (its transfer ended).
    func forget(_ taker: Taker) {
        waiters[taker] = nil
        tags[taker] = nil
    }

    /// `taker` waits for its own `--limit-rate` until `until` (ms): it stays in line meanwhile, so
    /// that the others take in turns and its turn is there when its own limit lets it take.
    func hold(_ taker: Taker, until: UInt64) {
        guard rate != nil else { return }
        waiters[taker] = until
    }

    /// `taker` takes `n` bytes (after ``delay(now:for:)`` returned 0).
    func take(_ n: Int, by taker: Taker) {
        guard rate != nil else { return }
        tokens -= Double(n)
        let start = startTag(taker)
        virtualTime = start
        tags[taker] = start + Double(n)
    }
}
