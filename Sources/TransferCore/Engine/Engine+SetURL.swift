/// `set-url` (SPEC "Living with it"): a renewed link for a download that is not running.
extension Engine {
    /// Gives a queued, paused, waiting or failed download a new URL through ``JobMachine``
    /// (``JobEvent/setURL(_:keepPart:)``). The part is kept when it has a validator for
    /// `If-Range` (a strong ETag or a Last-Modified), so the next attempt resumes it only if the new
    /// URL serves the same content, and starts over from byte 0 otherwise; a part without one is
    /// dropped, since a plain `Range` could splice two files.
    /// - Returns: the job object, or nil for an unknown id.
    /// - Throws: `TransferError` (`invalid_request`) for a refused URL; ``JobRefusal`` otherwise.
    public func setURL(_ id: Int64, url: String) throws -> JobSnapshot? {
        let valid = try RequestValidator.validatedURL(url)
        guard let r = record(id) else { return nil }
        try ensureStoreWritable()  // a full home refuses the change before anything changes
        let strongETag = r.etag.map { !$0.hasPrefix("W/") } ?? false
        let keepPart = strongETag || r.lastModified != nil
        let result = dispatch(id, .setURL(valid, keepPart: keepPart), loaded: JobFacts(r))
        if case .failure(let refusal)? = result { throw refusal }
        Log.info("new URL \(URLRedaction.redact(valid))\(keepPart ? "" : " (part dropped: no validator)")", job: id)
        return job(id)
    }
}
