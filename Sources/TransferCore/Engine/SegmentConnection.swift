import Foundation

/// One further connection of a segmented download: a `Range: bytes=A-B` request with `If-Range`
/// for the segment that starts at ``start``, its own easy handle, and just enough of the
/// response's headers to check it (status, `Content-Range`, validators). Its body goes to the
/// download (``DownloadTask``), which owns the part, the plan and the decisions. Kept alive by
/// the download while in the multi. Loop-thread only.
final class SegmentConnection {
    /// The start of the segment it fetches (the segment's identity in the plan).
    let start: Int64
    /// The handle.
    let easy: CurlEasy
    /// Whether it is still in the multi.
    var isActive = true
    /// Whether the download stopped it because its segment is complete (not an error).
    var reachedEnd = false
    /// Whether the response's headers were checked and its body is written.
    var accepted = false
    /// Why it failed, when its response was refused (an error status).
    var failure: TransferError?

    private(set) var status: Int?
    private(set) var contentRange: String?
    private(set) var etag: String?
    private(set) var lastModified: String?
    private(set) var retryAfterValue: String?

    /// Creates the connection (not yet added to the multi).
    init(start: Int64, easy: CurlEasy) {
        self.start = start
        self.easy = easy
    }

    /// Parses one header line; calls `complete` at the end of a final response's headers.
    /// Returns false to end the transfer.
    func header(_ raw: UnsafeRawBufferPointer, complete: () -> Bool) -> Bool {
        switch HeaderLine.parse(raw) {
        case .status(let code):
            status = code
            contentRange = nil
            etag = nil
            lastModified = nil
            retryAfterValue = nil
        case .end:
            if let s = status, s >= 200 { return complete() }
        case .field("content-range", let value): contentRange = value
        case .field("etag", let value): etag = value
        case .field("last-modified", let value): lastModified = value
        case .field("retry-after", let value): retryAfterValue = value
        case .field, .other: break
        }
        return true
    }

    /// Seconds the server asked to wait (`Retry-After` of a 429 or 503, SPEC "Retries"), if any.
    var retryAfter: Double? { RetryPolicy.retryAfter(status: status, value: retryAfterValue) }

    /// The start, end and total of `Content-Range: bytes A-B/T`.
    var range: (start: Int64, end: Int64?, total: Int64?)? { contentRange.flatMap(HeaderLine.contentRange) }
}
