import Foundation

/// Adding jobs (`transfer.add`, `transfer.addMany`, a batch sent in parts): each request validated
/// and checked against the destinations in memory, inserted in one transaction, then scheduled.
extension Engine {
    /// Validates one request and builds its row; `claimed` are destinations taken by earlier
    /// requests of the same batch (with their index), `knownDirectories` the directories they found
    /// (``RequestValidator/validate(_:knownDirectories:certificates:)``), `resolved` the directories their
    /// paths were resolved in (``CanonicalPath``).
    private func prepareRecord(
        _ request: TransferRequest, claimed: [String: Int], knownDirectories: inout Set<String>,
        resolved: inout [String: String], now: Double = Timestamp.now()
    ) throws -> JobRecord {
        var req = try RequestValidator.validate(
            request, knownDirectories: &knownDirectories, certificates: PEMCertificates.count(in:))
        // One spelling a file, so that the clash checks below and the scheduler's see every job
        // that holds it.
        req.destination = req.destination.map { CanonicalPath.file($0, cache: &resolved) }
        req.directory = req.directory.map { CanonicalPath.directory($0, cache: &resolved) }
        req.response = req.response.map { CanonicalPath.file($0, cache: &resolved) }
        let kind: JobKind = req.kind == JobKind.upload.rawValue ? .upload : .download
        var destination: String?
        var sourceSize: Int64?
        var sourceMtime: Double?
        var stamps: [SourceStamp]?
        var total: Int64?
        if kind == .download {
            destination = req.destination
        } else {
            // The file, or every file part of a form: size and mtime for source_changed.
            let source = try UploadTask.inspectSources(of: req)
            destination = source.path
            sourceSize = source.size
            sourceMtime = source.modificationTime
            total = source.payloadLength
            stamps = source.stamps
        }
        let record = JobRecord(
            id: nil, kind: kind, url: req.url, method: req.method ?? (kind == .download ? "GET" : "PUT"),
            state: .queued, request: req, destination: destination, durableBytes: 0, total: total, etag: nil,
            lastModified: nil, attempts: 0, retriesUsed: 0, httpStatus: nil, error: nil, waitReason: nil,
            nextRetryAt: nil, priority: req.priority ?? 0, finalizing: false, sha256: nil, sourceSize: sourceSize,
            sourceMtime: sourceMtime, response: nil, createdAt: now, updatedAt: now, completedAt: nil,
            sources: stamps)
        // One job a path: a download's destination, an upload's response file (``JobRecord/heldPath``).
        if let path = record.heldPath {
            if let earlier = claimed[path] {
                throw Destination.heldByEarlierRequest(path, download: kind == .download, earlier: earlier)
            }
            if let err = Destination(path: path).clash(replace: req.replace == true, heldBy: scheduler.holder(of: path))
            {
                throw kind == .download ? err : TransferError(err.code, "response: " + err.message, retryable: false)
            }
        }
        return record
    }

    /// Validates and queues a new job (SPEC: refused input changes nothing).
    /// - Throws: `TransferError` for refused input; a store error if it cannot be written.
    public func add(_ request: TransferRequest) throws -> JobSnapshot {
        try addMany([request], refusalOfOne: true)[0]
    }

    /// Checks a request as ``add(_:)`` would, without queuing it; returns the new job's row.
    public func prepare(_ request: TransferRequest) throws -> JobRecord {
        var directories = Set<String>()
        return try prepareRecord(request, claimed: [:], knownDirectories: &directories, resolved: &resolvedThisPass)
    }

    /// Holds a batch part's rows in the store until the batch is complete.
    public func stage(_ records: [JobRecord], batch: String) throws {
        try store.stage(records, batch: batch)
    }

    /// Forgets a dropped batch's held rows.
    public func discardStaged(batch: String) {
        do {
            try store.discardStaged(batch: batch)
        } catch {
            Log.info("could not forget the rows of batch \(batch): \(error)")
        }
    }

    /// Queues a complete batch's held rows (SPEC "Scale"): its destinations are checked against
    /// the jobs queued since its parts arrived, then its rows become jobs in one transaction. The
    /// scheduler learns the new jobs from the store, so the batch is never held in memory whole.
    public func addStaged(_ batch: BatchAssembler.Complete) throws -> ClosedRange<Int64> {
        for (path, claim) in batch.destinations.sorted(by: { $0.value.index < $1.value.index }) {
            if let err = Destination(path: path).clash(replace: claim.replace, heldBy: scheduler.holder(of: path)) {
                throw BatchRefusal(index: claim.index, error: err)
            }
        }
        try ensureStoreWritable()
        let inserted: ClosedRange<Int64>?
        do {
            inserted = try store.insertStaged(batch: batch.key.storeKey, now: Timestamp.now())
        } catch {
            throw storeFailure(error)  // one transaction: nothing was inserted
        }
        guard let ids = inserted else {
            throw TransferError(.invalidRequest, "batch \(batch.key.batch) holds no requests")
        }
        let facts = try store.schedulingFacts(ids: ids)
        scheduler.reserveCapacity(forAdding: facts.count)
        for f in facts { scheduler.add(f) }
        if onEvents != nil && wantsEvents() {
            var after = ids.lowerBound - 1
            while after < ids.upperBound {
                let page = try store.listings(state: nil, after: after, limit: JobListStream.pageSize).filter {
                    $0.id <= ids.upperBound
                }
                guard let last = page.last else { break }
                for listing in page {
                    events.append((EngineNotification.added, JobSnapshot(listing, live: nil)))
                }
                after = last.id
            }
        }
        Log.info("queued \(ids.count) jobs (\(ids.lowerBound)...\(ids.upperBound))")
        schedule()
        return ids
    }

    /// Queues all requests in one transaction, or none.
    /// - Throws: ``BatchRefusal`` naming the first refused request (from 0).
    public func addMany(_ requests: [TransferRequest]) throws -> AddedJobs {
        try addMany(requests, refusalOfOne: false)
    }

    private func addMany(_ requests: [TransferRequest], refusalOfOne: Bool) throws
        -> AddedJobs
    {
        var records: [JobRecord] = []
        records.reserveCapacity(requests.count)
        var claimed: [String: Int] = [:]
        var directories: Set<String> = []
        // One time for the whole list: its jobs share their timestamps (and their strings).
        let now = Timestamp.now()
        for (i, request) in requests.enumerated() {
            do {
                let r = try prepareRecord(
                    request, claimed: claimed, knownDirectories: &directories, resolved: &resolvedThisPass, now: now)
                if let d = r.heldPath { claimed[d] = i }
                records.append(r)
            } catch let e as TransferError {
                if refusalOfOne { throw e }
                throw BatchRefusal(index: i, error: e)
            }
        }
        try ensureStoreWritable()
        do {
            try store.insert(&records)  // ids set in place: one copy of the rows in memory
        } catch {
            throw storeFailure(error)  // one transaction: nothing was inserted
        }
        let inserted = records
        records = []
        // The same two timestamp strings for every job of the list, not two new ones a job.
        let jobs = AddedJobs(records: inserted, stamp: Timestamp.rfc3339(now))
        scheduler.reserveCapacity(forAdding: inserted.count)
        for r in inserted { scheduler.add(JobFacts(r)) }
        let cached = inserted.prefix(max(0, EngineConfig.queuedRecordCacheLimit - queuedRecords.count))
        // Grown once: doubling moved every cached record (a large struct) again and again, a
        // sixth of queuing 2,000 jobs in a profile.
        queuedRecords.reserveCapacity(queuedRecords.count + cached.count)
        for r in cached {
            if let id = r.id { queuedRecords[id] = r }
        }
        if onEvents != nil && wantsEvents() {
            for job in jobs { events.append((EngineNotification.added, job)) }
        }
        if inserted.count == 1, let id = inserted[0].id {
            Log.info("queued \(inserted[0].kind.rawValue) \(URLRedaction.redact(inserted[0].url))", job: id)
        } else if let first = inserted.first?.id, let last = inserted.last?.id {
            Log.info("queued \(inserted.count) jobs (\(first)...\(last))")
        }
        schedule()
        return jobs
    }
}
