/// Watches the free space of the file systems that jobs waiting with `waitReason` `"disk"` need
/// (SPEC "Disk full and other faults"): every ``defaultInterval`` it asks each job's file system
/// (``DiskSpace``) and hands back the jobs whose need is met. Its timer runs only while some job
/// waits for space: no busy loop, no timer when none does. Loop-thread only.
final class DiskSpaceWatcher {
    /// How often the free space is looked at (ms); the SPEC asks for at least every 5 s.
    static let defaultInterval: UInt64 = 2000
    /// What a job whose size is unknown waits for: more than this many bytes free.
    static let unknownSizeNeed: Int64 = 1 << 20
    /// The longest a job that keeps running out of space without progress is held back (s).
    static let maxHoldOff = 300.0

    /// What a job waits for.
    struct Need: Equatable {
        /// A path on the file system (the part's directory).
        var path: String
        /// Bytes still to write; with `sizeKnown` false, the 1 MiB that must be exceeded.
        var bytes: Int64
        /// Whether the download's total is known (then `bytes` free suffice).
        var sizeKnown: Bool
        /// Not started again before this monotonic time (s): a job that ran out of space again
        /// without writing a byte (a quota `statvfs` does not show) is held back, doubling.
        var notBefore: Double = 0

        /// Whether `free` bytes meet the need.
        func isMet(by free: Int64) -> Bool { sizeKnown ? free >= bytes : free > bytes }

        /// "3.0 MiB", or "more than 1.0 MiB": what the job waits for, for `status`.
        var text: String { (sizeKnown ? "" : "more than ") + DiskSpace.describe(bytes) }
    }

    private var needs: [Int64: Need] = [:]
    private let timer: LoopTimer
    private let interval: UInt64
    /// Free bytes at a path (replaceable for tests).
    var freeSpace: (String) -> Int64? = DiskSpace.available
    /// Monotonic seconds (replaceable for tests).
    var now: () -> Double = BatchAssembler.monotonicSeconds
    /// Whether the job still waits for space (a paused or cancelled one is forgotten).
    private let stillWaiting: (Int64) -> Bool
    /// Receives each job whose need is met, in id order.
    private let onFree: (Int64) -> Void

    /// Creates a watcher with no job.
    init(
        loop: EventLoop, interval: UInt64 = DiskSpaceWatcher.defaultInterval,
        stillWaiting: @escaping (Int64) -> Bool, onFree: @escaping (Int64) -> Void
    ) {
        self.timer = LoopTimer(loop: loop)
        self.interval = interval
        self.stillWaiting = stillWaiting
        self.onFree = onFree
    }

    /// The jobs watched now, in id order.
    var watched: [Int64] { needs.keys.sorted() }

    /// What a job waits for, if it is watched.
    func need(of id: Int64) -> Need? { needs[id] }

    /// Watches a job (again, with a new need).
    func watch(_ id: Int64, _ need: Need) {
        needs[id] = need
        if !timer.isActive {
            timer.start(after: interval, repeating: interval) { [unowned self] in self.check() }
        }
    }

    /// Forgets a job.
    func forget(_ id: Int64) {
        needs[id] = nil
        if needs.isEmpty { timer.stop() }
    }

    /// Looks at the free space now: jobs that no longer wait are forgotten, and jobs whose need
    /// is met are handed to `onFree`. Jobs on one file system share its space in id order, so
    /// two jobs are not started on the same free megabytes.
    func check() {
        var free: [String: Int64] = [:]
        var ready: [Int64] = []
        let t = now()
        for id in needs.keys.sorted() {
            guard let need = needs[id] else { continue }
            guard stillWaiting(id) else {
                needs[id] = nil
                continue
            }
            if need.notBefore > t { continue }
            // A file system that cannot say (ramfs counts no blocks) is tried again: the
            // attempt finds out.
            let avail = free[need.path] ?? freeSpace(need.path) ?? .max
            if need.isMet(by: avail) {
                ready.append(id)
                needs[id] = nil
                free[need.path] = avail - need.bytes
            } else {
                free[need.path] = avail
            }
        }
        if needs.isEmpty { timer.stop() }
        for id in ready { onFree(id) }
    }

    /// Stops watching (shutdown).
    func close() {
        needs = [:]
        timer.close()
    }
}
