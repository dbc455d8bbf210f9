/// The changes of one pass of the event loop, committed together in one transaction by
/// ``JobStore/commit(_:now:)`` (group commit). Later changes to the same job or attempt replace
/// earlier ones field by field. Loop-thread only.
public struct WriteBatch {
    /// Column changes per job.
    public private(set) var patches: [Int64: JobPatch] = [:]
    /// When each job's last change was made, where the caller said (its `updatedAt`, as the copy
    /// in memory that events show has it); the commit's time otherwise.
    public private(set) var changedAt: [Int64: Double] = [:]
    /// Attempt history entries to insert or replace, by job and position.
    public private(set) var attempts: [AttemptKey: AttemptRecord] = [:]
    /// Jobs to delete (with their history).
    public private(set) var deletions: Set<Int64> = []
    /// Hooks owed to endings a job left to write (``OwedHook``), by their own id.
    public private(set) var owedHooks: [Int64: OwedHook] = [:]
    /// Owed hooks that are done with (their rows deleted), by their own id.
    public private(set) var finishedOwedHooks: Set<Int64> = []
    /// Part files to delete once this batch is written (``DoomedPart``), by path.
    public private(set) var doomedParts: [String: DoomedPart] = [:]
    /// Part files deleted (their ``DoomedPart`` records go), by path.
    public private(set) var deletedParts: Set<String> = []

    /// An empty batch.
    public init() {}

    /// An empty batch with room for the changes of `capacity` jobs.
    public init(capacity: Int) {
        patches.reserveCapacity(capacity)
    }

    /// Whether there is nothing to write.
    public var isEmpty: Bool {
        patches.isEmpty && attempts.isEmpty && deletions.isEmpty && owedHooks.isEmpty
            && finishedOwedHooks.isEmpty && doomedParts.isEmpty && deletedParts.isEmpty
    }

    /// Adds column changes for a job, made at `at` (seconds since 1970) when given.
    public mutating func patch(_ id: Int64, _ p: JobPatch, at: Double? = nil) {
        guard !p.isEmpty else { return }
        patches[id, default: JobPatch()].merge(p)
        if let at { changedAt[id] = at }
    }

    /// Writes one history entry (the `seq`-th of the job, from 0).
    public mutating func putAttempt(_ id: Int64, seq: Int, _ a: AttemptRecord) {
        attempts[AttemptKey(jobId: id, seq: seq)] = a
    }

    /// Deletes a job and its history; pending changes to it are dropped.
    public mutating func delete(_ id: Int64) {
        patches[id] = nil
        changedAt[id] = nil
        attempts = attempts.filter { $0.key.jobId != id }
        deletions.insert(id)
    }

    /// Writes (or replaces) a hook owed to an ending the job left.
    public mutating func putOwedHook(_ h: OwedHook) {
        finishedOwedHooks.remove(h.id)
        owedHooks[h.id] = h
    }

    /// Deletes an owed hook (by its own id): its ending's last hook finished.
    public mutating func finishOwedHook(_ id: Int64) {
        owedHooks[id] = nil
        finishedOwedHooks.insert(id)
    }

    /// Records, with this batch's rows, a part file that is deleted after it is written.
    public mutating func doom(_ part: DoomedPart) {
        deletedParts.remove(part.path)
        doomedParts[part.path] = part
    }

    /// Forgets a doomed part: the file is gone.
    public mutating func partDeleted(_ path: String) {
        doomedParts[path] = nil
        deletedParts.insert(path)
    }
}

/// A history entry's place: its job and its position in that job's history.
public struct AttemptKey: Hashable, Sendable {
    /// The job.
    public var jobId: Int64
    /// The entry's position in the job's history, from 0.
    public var seq: Int
}
