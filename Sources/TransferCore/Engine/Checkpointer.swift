/// Checkpoints (SPEC "Downloads"): about once a second while bytes flow, a download's part is
/// fdatasync'ed and only then is its durable offset recorded ("bytes before bookkeeping").
///
/// The one place that decides the cadence, keeps a generation per job so that a sync started
/// before the part was thrown away can never record an offset afterwards, and turns a durable
/// offset or a discarded part into row changes. Loop-thread only.
final class Checkpointer {
    /// The default interval between checkpoints while bytes flow.
    static let defaultInterval = 1.0

    /// Seconds between rounds.
    let interval: Double
    private var generations: [Int64: Int] = [:]
    private var lastRound: UInt64 = 0
    /// Receives a job's new durable offset (written with the next group commit).
    private let record: (_ job: Int64, _ offset: Int64) -> Void

    /// Creates a checkpointer; `record` writes a durable offset.
    init(interval: Double = defaultInterval, record: @escaping (_ job: Int64, _ offset: Int64) -> Void) {
        self.interval = interval
        self.record = record
    }

    /// Whether a round of checkpoints is due at loop time `now` (ms); starts the round if so.
    func roundDue(now: UInt64) -> Bool {
        guard Double(now &- lastRound) >= interval * 1000 else { return false }
        lastRound = now
        return true
    }

    /// The current generation of a job's part: pass it back to ``recorded(_:generation:offset:)``.
    func generation(_ job: Int64) -> Int { generations[job, default: 0] }

    /// A sync of the part finished: records the offset unless the part was discarded meanwhile.
    func recorded(_ job: Int64, generation: Int, offset: Int64) {
        guard generations[job, default: 0] == generation else { return }
        record(job, offset)
    }

    /// The part's bytes are thrown away: pending syncs become stale, and the returned changes
    /// (durable offset 0, no validators) must be written before the file is cut.
    func discard(_ job: Int64) -> JobPatch {
        generations[job, default: 0] += 1
        return .partDiscarded
    }

    /// Forgets a job that no longer exists.
    func forget(_ job: Int64) { generations[job] = nil }
}
