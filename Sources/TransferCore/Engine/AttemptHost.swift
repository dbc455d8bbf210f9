/// What an attempt (``TransferTask``) may ask of the engine that runs it: the loop, the multi,
/// row changes, checkpoints, destinations, and the report of its end. Everything else about the
/// job (its state, retries, slots) is the engine's. Loop-thread only.
protocol AttemptHost: AnyObject {
    /// The daemon's loop.
    var loop: EventLoop { get }
    /// The engine's curl multi.
    var multi: CurlMulti { get }
    /// The engine's settings (modes of created files, stall window).
    var config: EngineConfig { get }
    /// Checkpoint cadence and generations.
    var checkpointer: Checkpointer { get }
    /// The daemon-wide bandwidth budgets.
    var bandwidth: BandwidthGovernor { get }
    /// Coalesced directory fsyncs after renames.
    var directorySyncer: DirectorySyncer { get }
    /// Small finished downloads put in place in batches.
    var smallFileWriter: SmallFileWriter { get }
    /// Changes the job's row (written with the loop pass's group commit; the attempt's cached
    /// record is updated at once).
    func write(_ job: Int64, _ patch: JobPatch)
    /// Writes a checkpoint's durable offsets: as ``write(_:_:)``, but a stopped attempt's last
    /// checkpoint leaves the job's `updatedAt` as it is (its object shows no change).
    func writeCheckpoint(_ job: Int64, _ patch: JobPatch)
    /// A part file is gone: a record of it as doomed (``DoomedPart``) is dropped with the pass.
    func partDeleted(_ path: String)
    /// Runs `body` once the changes made so far are committed (bookkeeping before a rename).
    func afterCommit(_ body: @escaping () -> Void)
    /// Connections the running attempts hold to `host` (``TransferTask/hostKey``), all jobs.
    func connections(toHost host: String) -> Int
    /// The job holding a download destination, other than `except`.
    func holder(of destination: String, except: Int64) -> Int64?
    /// Whether an earlier attempt of the job was stopped and has not finished stopping yet (its
    /// last checkpoint still under way: the job's durable offset is not final).
    func isStopping(_ job: Int64) -> Bool
    /// Writes the task's current history entry (a resumable upload's requests are one entry
    /// each).
    func recordHistory(_ task: TransferTask)
    /// Keeps the open attempt's history entry at the job's durable bytes (after a checkpoint).
    func recordAttemptBytes(_ id: Int64, _ durable: Int64)
    /// A jitter sample in -1...1 for a retry delay (a failed range waits one out).
    func retryJitter() -> Double
    /// Whether a failed range request of the job may be asked for again: one of the job's
    /// retries is spent if so (``JobEvent/rangeFailed(_:)``).
    func spendRetryOnRange(_ id: Int64, _ failure: TransferError) -> Bool
    /// The attempt ended (called once, unless the engine stopped it first).
    func attemptEnded(_ task: TransferTask, _ outcome: AttemptOutcome)
    /// An attempt's response is complete and its file is being put in place: the next queued
    /// download may stand by for its slot (``Engine/standBy()``).
    func attemptFinishing()
}

/// How one attempt of a transfer ended.
public enum AttemptOutcome {
    /// The transfer finished and was verified; the digest of the file or payload.
    case completed(sha256: String)
    /// The attempt failed; `retryAfter` is the server's `Retry-After`, in seconds. `retrySpent`
    /// as in ``AttemptResult/failed(_:retryAfter:retrySpent:)``.
    case failed(TransferError, retryAfter: Double?, retrySpent: Bool = false)
}

/// Where one attempt is in its life: the states that replace a set of flags.
enum AttemptPhase: Equatable {
    /// Getting ready before the first request (files opened, a resumed part re-hashed).
    case preparing
    /// A request is in the multi.
    case transferring
    /// The response is complete: syncing, verifying, moving into place. Not stoppable by the
    /// user (only `remove` forgets it).
    case finishing
    /// Over: reported, or stopped by the engine. Late callbacks do nothing.
    case ended
}
