import Foundation

/// A segmented download's ranges (SPEC Amendment 2 "Segmented downloads"): the plan's ranges
/// fetched over further connections (``SegmentConnection``), each written at its offset in the
/// part, pumped while connections are wanted, and the rules for a range that fails.
extension DownloadTask {
    /// The first response (`206` to `bytes=0-`) allows segments: split the file and start the
    /// further connections (after this callback).
    func beginSegments() {
        guard let t = total, t >= SegmentPlan.minimumSize, ifRangeValue != nil, partPath != nil else { return }
        if part == nil {
            do { try writeHeldToPart() } catch {
                abortError = TransferError.from(error, retryable: false)
                return
            }
        }
        let p = SegmentPlan(total: t, connections: wantConnections)
        guard p.segments.count > 1 else { return }
        multiplexed = easy?.isMultiplexed ?? false
        plan = p
        primarySegment = 0
        primaryAccepted = true
        var patch = JobPatch()
        patch.segments = .some(p.storedText)
        write(patch)
        Log.info(
            "segmented: \(p.segments.count) ranges of \(t) bytes over up to \(wantConnections) connections", job: jobId)
        schedulePump()
    }

    /// The response to this task's own request for an unfinished range of a resumed plan.
    func resumedSegmentHeaders(status s: Int) {
        guard let start = primarySegment, let p = plan, let seg = p.segment(start) else { return }
        let range = contentRange()
        if s == 206, let range, range.start == seg.fetched, range.total == p.total,
            validatorsMatch(etag: header("etag"), lastModified: header("last-modified"))
        {
            keepBody = true
            primaryAccepted = true
            multiplexed = easy?.isMultiplexed ?? false
            schedulePump()
            return
        }
        guard (200..<300).contains(s) || s == 416 else { return }  // an error status fails the attempt
        Log.info("server answered \(s) to a range of a segmented download: restarting from byte 0", job: jobId)
        if s != 200 {
            // Another version (or a shorter file): this request ends, and the download starts
            // over on one connection (``pump()``).
            fallbackRequested = true
            schedulePump()
            return
        }
        // A 200: the whole (perhaps new) file from byte 0; kept, over this one connection.
        resetToZero()
        singleOnly = true
        total = announcedLength
        acceptBody()
    }

    /// Takes the response's body: records its validators and total (and a durable 0 when it
    /// starts from the first byte), then lets the body callbacks write.
    func acceptBody() {
        var p = JobPatch()
        if offset == 0 { p.durableBytes = 0 }
        p.etag = .some(header("etag"))
        p.lastModified = .some(header("last-modified"))
        p.total = .some(total)
        write(p)
        keepBody = true
    }

    /// Whether a response's validators are the ones the part's bytes came with.
    func validatorsMatch(etag: String?, lastModified: String?) -> Bool {
        if let mine = record.etag, !mine.hasPrefix("W/") { return etag == mine }
        // A weak ETag cannot go in If-Range, so the date did; but another ETag than the part's,
        // weak, strong or none at all, is another version all the same (one replaced within the
        // same second keeps its Last-Modified; found by outside audits).
        if let mine = record.etag, etag != mine { return false }
        if let mine = record.lastModified { return lastModified == mine }
        return false
    }

    /// Writes bytes at the segment's fetch offset, up to its end; the digest follows the
    /// contiguous prefix.
    func writeSegment(_ start: Int64, _ data: UnsafeRawBufferPointer) -> SegmentWrite {
        guard let seg = plan?.segment(start), let part, let base = data.baseAddress else {
            return data.isEmpty ? .accept : .reachedEnd
        }
        let n = Int(min(Int64(data.count), seg.remaining))
        if n > 0 {
            let rc = part.append(base, n, at: seg.fetched)
            if rc != 0 {
                abortError = FileErrors.error(rc, "cannot write \(part.path)")
                return .failed
            }
            // Advanced in place: a copy of the plan made every body callback copy its ranges.
            plan?.advance(start, by: Int64(n))
            if let p = plan {
                progressed(to: p.fetchedBytes)
                hasher?.advance(to: p.contiguousEnd)
            }
        }
        return n < data.count ? .reachedEnd : .accept
    }

    /// Ends this request (and every range's) and starts the download over from byte 0 on one
    /// connection, in this attempt (``fallBackToOneConnection()``, run by ``pump()``): the part's
    /// bytes and the server's are of two versions, never spliced. No retry is spent.
    func startOver(_ why: String) {
        Log.info("\(why): restarting from byte 0 on one connection", job: jobId)
        fallbackRequested = true
        schedulePump()
    }

    /// Runs ``pump()`` soon on the loop (never inside a curl callback).
    func schedulePump() {
        if pumpTimer == nil { pumpTimer = LoopTimer(loop: engine.loop) }
        guard pumpTimer?.isActive != true else { return }
        pumpTimer?.start(after: 1) { [weak self] in self?.pump() }
    }

    /// Brings the connections in line with the plan: a fallback to one connection, the end of
    /// the attempt when every range is fetched, or free connections taking work (an unfinished
    /// range nobody fetches, else half of the largest remainder).
    func pump() {
        guard phase == .transferring else { return }
        if fallbackRequested {
            fallBackToOneConnection()
            return
        }
        connections.removeAll { !$0.isActive }
        guard var p = plan else { return }
        if p.isComplete && openConnections == 0 {
            finishAttempt()
            return
        }
        var busy = Set(connections.map(\.start))
        if let s = primarySegment { busy.insert(s) }
        if let until = rangesHeldUntil {
            let now = engine.loop.nowMillis
            if now < until {
                if busy.isEmpty {
                    // Nothing else at work: the job waits (SPEC's backoff and `Retry-After`,
                    // `waiting` with `nextRetryAt`) and the next attempt resumes every range.
                    endForRanges()
                    return
                }
                if holdTimer == nil { holdTimer = LoopTimer(loop: engine.loop) }
                holdTimer?.start(after: until - now) { [weak self] in self?.pump() }
                return
            }
            rangesHeldUntil = nil
        }
        // No more than `--max-per-host` to the host, all jobs together (one always, so that the
        // download goes on; libcurl queues it until a connection is free).
        // Over HTTP/2 the ranges are streams of one connection (libcurl multiplexes them).
        let free = multiplexed ? wantConnections : engine.config.maxPerHost - engine.connections(toHost: hostKey)
        let cap = busy.count + max(busy.isEmpty ? 1 : 0, free)
        while busy.count < min(wantConnections, cap), let start = p.nextWork(busy: busy) {
            plan = p
            busy.insert(start)
            startConnection(start)
            // A range asked for after a failure: the retry it spent is used.
            rangeRetriesUnused = max(0, rangeRetriesUnused - 1)
        }
        plan = p
        if busy.isEmpty && !p.isComplete {
            complete(
                failure: lastConnectionError ?? TransferError(.network, "no connection for a range", retryable: true),
                retrySpent: rangeRetriesUnused > 0)
        }
    }

    /// Takes free host connections when there is work for them (the engine's tick): another
    /// job may have freed some.
    func rebalance() {
        guard plan != nil, !fallbackRequested, connections.count + (primaryAccepted ? 1 : 0) < wantConnections,
            multiplexed || engine.connections(toHost: hostKey) < engine.config.maxPerHost
        else { return }
        schedulePump()
    }

    /// Starts a further connection for the segment at `start`: `Range: bytes=A-B` + `If-Range`.
    func startConnection(_ start: Int64) {
        guard let seg = plan?.segment(start) else { return }
        do {
            let e = try CurlEasy()
            let c = SegmentConnection(start: start, easy: e)
            var extra = ["Accept-Encoding: identity"]
            if let v = ifRangeValue { extra.append("If-Range: \(v)") }
            var o = requestOptions(for: e, extraHeaders: extra, overridden: overriddenHeaders)
            o.rangeFrom = seg.fetched
            o.rangeTo = seg.end - 1
            o.waitForMultiplexing = o.url.lowercased().hasPrefix("https:")  // HTTP/2 only over TLS
            e.onHeader = { [unowned self, unowned c] line in c.header(line) { self.segmentHeaders(c) } }
            e.onBody = { [unowned self, unowned c] data in self.segmentBody(c, data) }
            e.onDone = { [unowned self, unowned c] error in self.segmentDone(c, error) }
            if let check = e.onPrerequest {
                // A refused pinned certificate is this range's failure, and the attempt's (`tls`,
                // not libcurl's "aborted by callback").
                e.onPrerequest = { [unowned self, unowned c] in
                    if check() { return true }
                    c.failure = self.abortError
                    return false
                }
            }
            e.configure(o)
            guard engine.multi.add(e) else {
                throw TransferError(.io, "cannot add a range to libcurl", retryable: true)
            }
            connections.append(c)
        } catch {
            connectionFailures += 1
            lastConnectionError = TransferError.from(error, retryable: true)
        }
    }

    /// Checks a further connection's response: a `206` of the range asked for, of the same
    /// version. A `200` or another version: back to one connection from byte 0.
    func segmentHeaders(_ c: SegmentConnection) -> Bool {
        guard phase == .transferring, let p = plan, let seg = p.segment(c.start), let s = c.status else { return false }
        lastProgressAt = engine.loop.nowMillis
        if s == 206, let range = c.range, range.start == seg.fetched, range.total == p.total,
            validatorsMatch(etag: c.etag, lastModified: c.lastModified)
        {
            c.accepted = true
            return true
        }
        if (200..<300).contains(s) {
            startOver("a range got \(s) (or another version)")
            return false
        }
        if s == 416 {
            // The range is past the file's end: the file has another length now (a `206` covering
            // the first bytes came before). As one connection does, the download starts over
            // from byte 0 in this attempt instead of failing (found by an outside audit).
            startOver("a range got 416 (the file has another length)")
            return false
        }
        c.failure = RetryPolicy.error(forHTTPStatus: s)
        return false
    }

    func segmentBody(_ c: SegmentConnection, _ data: UnsafeRawBufferPointer) -> CurlEasy.BodyVerdict {
        guard c.accepted, phase == .transferring else { return .accept }
        guard pace(data.count) else { return .pause }
        switch writeSegment(c.start, data) {
        case .accept: return .accept
        case .reachedEnd:
            c.reachedEnd = true
            return .abort
        case .failed:
            c.failure = abortError
            fallbackRequested = false
            schedulePump()
            return .abort
        }
    }

    /// A further connection is done (out of the multi): its range is complete, or it failed
    /// and its range goes back to the plan.
    func segmentDone(_ c: SegmentConnection, _ error: TransferError?) {
        c.isActive = false
        guard phase == .transferring else { return }
        if let abortError, c.failure == abortError {
            complete(failure: abortError)  // a write failed: the part cannot take more
            return
        }
        let complete = plan?.segment(c.start)?.isComplete ?? true
        if !c.reachedEnd && !complete && !fallbackRequested
            && !(c.accepted && answeredShortRange(c.start, error: error, range: c.range))
        {
            let failure = c.failure ?? error ?? TransferError(.network, "a range ended early", retryable: true)
            // Refused by an HTTP status (``segmentHeaders(_:)`` set the failure from it).
            lastConnectionStatus = c.failure != nil ? c.status.flatMap { $0 >= 300 ? $0 : nil } : nil
            if !rangeFailed(failure, retryAfter: c.retryAfter) { return }
        }
        schedulePump()
    }

    /// The fewest bytes a `206` shorter than the range asked for must bring to count as an answer
    /// rather than as a range ended early: a server that sends a few bytes a request would
    /// otherwise be asked millions of times.
    static let shortRangeMinimum: Int64 = 64 * 1024

    /// Whether a request for the segment at `start` ended well with all of a `206` that covered
    /// less than was asked for (`Content-Range: bytes A-C/T`, C short of the segment's end; RFC
    /// 9110 lets a server send less): the rest of the segment goes back to the plan for the next
    /// free connection, and no retry is spent.
    func answeredShortRange(_ start: Int64, error: TransferError?, range: (start: Int64, end: Int64?, total: Int64?)?)
        -> Bool
    {
        guard error == nil, let range, let end = range.end, let seg = plan?.segment(start), !seg.isComplete,
            end - range.start + 1 >= Self.shortRangeMinimum, seg.fetched == end + 1
        else { return false }
        Log.info("a range was answered short, up to byte \(end): the rest goes back to the plan", job: jobId)
        return true
    }

    /// A range request failed (a further connection's, or this task's own while it fetched a
    /// range). The attempt ends (false) when the error is not retryable, or when the job's retries
    /// left (`--retries`, SPEC: 0 never repeats a request), at most ``maxConnectionFailures``,
    /// do not cover another request. Otherwise the other connections go on, one fewer is wanted,
    /// and no range request starts before the retry policy's backoff for this attempt's n-th
    /// failure, or the server's `Retry-After` if longer (``pump()``).
    func rangeFailed(_ failure: TransferError, retryAfter: Double?) -> Bool {
        connectionFailures += 1
        lastConnectionError = failure
        lastConnectionRetryAfter = retryAfter
        wantConnections = max(1, wantConnections - 1)
        Log.info("a range request failed: \(failure.message)", job: jobId)
        // Asking for the range again spends one of the job's retries, as a new attempt would: a
        // range is asked for at most retries + 1 times in all (README; decided by JobMachine).
        guard connectionFailures <= Self.maxConnectionFailures, engine.spendRetryOnRange(jobId, failure) else {
            endForRanges()
            return false
        }
        rangeRetriesUnused += 1
        let policy = RetryPolicy(retryLimit: record.request.retries ?? RetryPolicy.defaultRetryLimit)
        let wait = policy.delay(forRetry: connectionFailures, retryAfter: retryAfter, jitter: engine.retryJitter())
        let until = engine.loop.nowMillis + UInt64(max(0, wait) * 1000)
        rangesHeldUntil = max(rangesHeldUntil ?? 0, until)
        return true
    }

    /// Ends the attempt with the last failed range request's error and `Retry-After`.
    func endForRanges() {
        if let status = lastConnectionStatus { noteFinalStatus(status) }
        complete(
            failure: lastConnectionError ?? TransferError(.network, "ranges kept failing", retryable: true),
            retryAfter: lastConnectionRetryAfter, retrySpent: rangeRetriesUnused > 0)
    }

    /// Stops every connection and starts over from byte 0 on one (bytes of two versions are
    /// never spliced): the database first, then the file.
    func fallBackToOneConnection() {
        fallbackRequested = false
        rangesHeldUntil = nil
        stopConnections()
        if let e = easy { engine.multi.remove(e) }  // harmless when it is already out
        primaryAccepted = false
        primaryReachedEnd = false
        singleOnly = true
        resetToZero()
        do { try startHop() } catch {
            complete(failure: TransferError.from(error, retryable: true))
        }
    }

    /// Takes every further connection out of the multi (never inside a curl callback).
    func stopConnections() {
        pumpTimer?.stop()
        holdTimer?.stop()
        for c in connections where c.isActive {
            engine.multi.remove(c.easy)
            c.isActive = false
        }
        connections = []
    }

    /// A segmented download's connections: this task's own once its range was accepted, and the
    /// further ones — with `countingQueued`, also those libcurl still holds back for a free
    /// connection to the host.
    func segmentConnections(countingQueued: Bool) -> Int {
        guard phase == .transferring else { return 0 }
        let further = connections.filter { $0.isActive && (countingQueued || $0.easy.engaged) }.count
        return (primaryAccepted ? 1 : 0) + further
    }
}
