extension JobListing {
    /// The listing of a full row.
    public init(_ r: JobRecord) {
        self.init(
            id: r.id ?? 0, kind: r.kind, url: r.url, method: r.method, state: r.state, destination: r.destination,
            durableBytes: r.durableBytes, total: r.total, attempts: r.attempts, httpStatus: r.httpStatus,
            error: r.error, waitReason: r.waitReason, nextRetryAt: r.nextRetryAt, insecure: r.request.insecure == true,
            sha256: r.sha256, createdAt: r.createdAt, updatedAt: r.updatedAt, completedAt: r.completedAt,
            response: r.response, history: r.history, uploadUrl: r.uploadUrl, resumable: r.resumable, hook: r.hook)
    }
}
