/// The jobs one `transfer.addMany` queued, in request order. Their job objects are made as they
/// are read, a page at a time when the result is written: 100,000 new jobs are held once, as the
/// rows just inserted, not a second time as objects.
public struct AddedJobs: RandomAccessCollection, Sendable {
    private let records: [JobRecord]
    /// The jobs' `createdAt` and `updatedAt`: one string for the whole list.
    private let stamp: String

    /// The jobs of `records` (inserted, so with ids), created at `stamp` (RFC 3339).
    init(records: [JobRecord], stamp: String) {
        self.records = records
        self.stamp = stamp
    }

    /// 0.
    public var startIndex: Int { 0 }
    /// The number of jobs.
    public var endIndex: Int { records.count }

    /// The job object of the `i`-th job.
    public subscript(i: Int) -> JobSnapshot {
        var job = JobSnapshot(JobListing(records[i]), live: nil)
        job.createdAt = stamp
        job.updatedAt = stamp
        return job
    }
}
