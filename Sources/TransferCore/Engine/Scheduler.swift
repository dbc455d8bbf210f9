import HeapModule

/// The in-memory queue (SPEC "Scheduling"): every unfinished job's ``JobFacts``, a priority queue
/// of the queued ones (higher priority first, then the oldest), the retry deadlines, the
/// destinations held by unfinished downloads and failed ones with data to resume
/// (``JobFacts/holdsPath``), and the count of jobs per state.
///
/// Choosing the next job, checking a destination clash and counting jobs never read the
/// database and cost O(log n) or O(1). Pure (no I/O, no clock): the engine arms one loop timer
/// for ``nextDeadline`` and asks for ``takeDue(now:)``. Loop-thread only.
struct Scheduler {
    /// A queued job's place: `popMax` yields the highest priority, then the lowest id.
    private struct QueueKey: Comparable {
        let priority: Int
        let id: Int64
        static func < (a: QueueKey, b: QueueKey) -> Bool {
            a.priority != b.priority ? a.priority < b.priority : a.id > b.id
        }
    }

    /// A retry deadline (seconds of the engine's monotonic clock): `popMin` yields the earliest.
    private struct Deadline: Comparable {
        let at: Double
        let id: Int64
        static func < (a: Deadline, b: Deadline) -> Bool { a.at != b.at ? a.at < b.at : a.id < b.id }
    }

    /// Facts of every job the scheduler tracks (unfinished, and failed ones).
    private(set) var facts: [Int64: JobFacts] = [:]
    /// Queued jobs; entries may be stale (checked when popped) and are compacted now and then.
    private var queue = Heap<QueueKey>()
    private var deadlines = Heap<Deadline>()
    /// The armed deadline of each waiting job (stale heap entries are skipped).
    private var armed: [Int64: Double] = [:]
    /// Paths held by tracked jobs: download destinations and uploads' `--response` files.
    private var destinations: [String: Int64] = [:]
    /// Jobs per state, every state present (completed and cancelled ones are only counted).
    private(set) var counts: [TransferState: Int]

    /// Creates an empty scheduler; `counts` are the stored jobs per state (the tracked ones are
    /// counted again when added, so pass the counts of untracked states only).
    init(untrackedCounts: [TransferState: Int] = [:]) {
        var c: [TransferState: Int] = [:]
        for s in TransferState.allCases { c[s] = untrackedCounts[s] ?? 0 }
        counts = c
    }

    /// Whether jobs in `state` are tracked in memory.
    static func tracks(_ state: TransferState) -> Bool { state != .completed && state != .cancelled }

    // MARK: - Jobs

    /// Starts tracking a job (new, or loaded at start).
    /// Makes room for `count` more jobs at once (a list queued together grows the tables once,
    /// not by doubling, which held two copies of them at the peak).
    mutating func reserveCapacity(forAdding count: Int) {
        facts.reserveCapacity(facts.count + count)
        destinations.reserveCapacity(destinations.count + count)
    }

    mutating func add(_ f: JobFacts) {
        counts[f.state, default: 0] += 1
        guard Self.tracks(f.state) else { return }
        facts[f.id] = f
        if f.state == .queued { queue.insert(QueueKey(priority: f.priority, id: f.id)) }
        if let d = f.holdsPath { destinations[d] = f.id }
    }

    /// Applies a committed change to a job's facts, keeping the queue, the counts and the
    /// destination index in step. `loaded` are the facts of a job that is not tracked (a completed
    /// or cancelled job being retried), read by the caller from the store.
    mutating func apply(_ patch: JobPatch, to id: Int64, loaded: JobFacts? = nil) {
        guard var f = facts[id] ?? loaded else { return }
        let wasTracked = facts[id] != nil
        let old = f
        f.apply(patch)
        if old.state != f.state {
            counts[old.state, default: 0] -= 1
            counts[f.state, default: 0] += 1
        }
        if old.holdsPath != f.holdsPath || !wasTracked {
            if let d = old.holdsPath, destinations[d] == id { destinations[d] = nil }
            if let d = f.holdsPath, Self.tracks(f.state) { destinations[d] = id }
        }
        if Self.tracks(f.state) {
            facts[id] = f
            if f.state == .queued && old.state != .queued { queue.insert(QueueKey(priority: f.priority, id: id)) }
        } else {
            forget(f)
        }
        if f.state != .waiting { armed[id] = nil }
        compactIfNeeded()
    }

    /// Stops tracking a deleted job.
    mutating func remove(_ id: Int64, state: TransferState) {
        counts[state, default: 0] -= 1
        if let f = facts[id] { forget(f) }
    }

    private mutating func forget(_ f: JobFacts) {
        facts[f.id] = nil
        armed[f.id] = nil
        if let d = f.holdsPath, destinations[d] == f.id { destinations[d] = nil }
    }

    /// The job holding a download destination, if any other than `except`.
    func holder(of destination: String, except: Int64? = nil) -> Int64? {
        guard let id = destinations[destination], id != except else { return nil }
        return id
    }

    // MARK: - Choosing

    /// The next queued job to start (highest priority, then oldest), taken off the queue; nil when
    /// none is queued. The caller starts it (its state becomes running).
    mutating func popNext() -> Int64? {
        while let key = queue.popMax() {
            if let f = facts[key.id], f.state == .queued, f.priority == key.priority { return key.id }
        }
        return nil
    }

    /// The next queued job to start, left on the queue (``popNext()`` takes it).
    mutating func peekNext() -> Int64? {
        while let key = queue.max {
            if let f = facts[key.id], f.state == .queued, f.priority == key.priority { return key.id }
            _ = queue.popMax()
        }
        return nil
    }

    /// Puts a job taken by ``popNext()`` back on the queue, if it is still queued: it did not start.
    mutating func putBack(_ id: Int64) {
        guard let f = facts[id], f.state == .queued else { return }
        queue.insert(QueueKey(priority: f.priority, id: id))
    }

    /// Whether queued job `a` starts before queued job `b` (higher priority, then older).
    func startsBefore(_ a: Int64, _ b: Int64) -> Bool {
        guard let fa = facts[a], let fb = facts[b] else { return false }
        return QueueKey(priority: fb.priority, id: b) < QueueKey(priority: fa.priority, id: a)
    }

    /// The next job to start in a free slot when the queued jobs `standing` stand by (taken off
    /// the queue by ``popNext()``, ``Engine+Standby``): the one of them that starts first, unless
    /// the queue's head starts before it (queued since, at a higher priority) — then the head is
    /// taken, and `dropped` names the standby to give up, so that the requests in flight stay
    /// within the slots. Nil when nothing is queued.
    mutating func next(standing: some Collection<Int64>) -> (id: Int64, dropped: Int64?)? {
        guard let best = standing.min(by: { startsBefore($0, $1) }) else { return popNext().map { ($0, nil) } }
        if let head = peekNext(), head != best, startsBefore(head, best) {
            _ = popNext()
            return (head, best)
        }
        return (best, nil)
    }

    /// Queued jobs in the order they would start (tests and `status`).
    func queuedInOrder() -> [Int64] {
        facts.values.filter { $0.state == .queued }
            .sorted { QueueKey(priority: $1.priority, id: $1.id) < QueueKey(priority: $0.priority, id: $0.id) }
            .map(\.id)
    }

    private mutating func compactIfNeeded() {
        let queued = counts[.queued] ?? 0
        if queue.count > 2 * queued + 1024 {
            queue = Heap(facts.values.filter { $0.state == .queued }.map { QueueKey(priority: $0.priority, id: $0.id) })
        }
        if deadlines.count > 2 * armed.count + 1024 {
            deadlines = Heap(armed.map { Deadline(at: $0.value, id: $0.key) })
        }
    }

    // MARK: - Retry deadlines

    /// Arms (or moves) a waiting job's retry deadline.
    mutating func arm(_ id: Int64, at: Double) {
        armed[id] = at
        deadlines.insert(Deadline(at: at, id: id))
    }

    /// Forgets a job's retry deadline.
    mutating func disarm(_ id: Int64) { armed[id] = nil }

    /// A waiting job's armed deadline (on the engine's monotonic clock), if any.
    func deadline(of id: Int64) -> Double? { armed[id] }

    /// The earliest armed deadline.
    mutating func nextDeadline() -> Double? {
        while let d = deadlines.min {
            if armed[d.id] == d.at { return d.at }
            _ = deadlines.popMin()
        }
        return nil
    }

    /// The jobs whose deadline is at or before `now`, earliest first; they are disarmed.
    mutating func takeDue(now: Double) -> [Int64] {
        var due: [Int64] = []
        while let d = deadlines.min, d.at <= now {
            _ = deadlines.popMin()
            if armed[d.id] == d.at {
                armed[d.id] = nil
                due.append(d.id)
            }
        }
        return due
    }

    /// Waiting jobs with `reason` (network or disk wake-ups).
    func waiting(_ reason: WaitReason) -> [Int64] {
        facts.values.filter { $0.state == .waiting && $0.waitReason == reason }.map(\.id).sorted()
    }
}
