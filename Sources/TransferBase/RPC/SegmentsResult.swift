/// The result of `transfer.segments`.
public struct SegmentsResult: Codable, Sendable, Equatable {
    /// The ranges, by start (`end` exclusive, `bytes` fetched so far).
    public var segments: [SegmentProgress]

    /// Creates the result.
    public init(segments: [SegmentProgress]) { self.segments = segments }
}
