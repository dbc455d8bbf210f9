import Foundation

/// The ranges of a segmented download (SPEC "Segmented downloads"): segments that tile the file
/// `[0, total)`, each with the bytes fetched so far and the bytes durable (synced, then
/// recorded), work stealing for a connection that finished, and the contiguous prefix that the
/// digest may read. A pure value: the attempt (``DownloadTask``) owns the connections, this owns
/// the arithmetic.
public struct SegmentPlan: Equatable, Sendable {
    /// One range of the file.
    public struct Segment: Equatable, Sendable {
        /// The first byte.
        public var start: Int64
        /// One past the last byte.
        public var end: Int64
        /// The next byte to write (`start...end`).
        public var fetched: Int64
        /// Bytes up to here are synced and recorded (`start...fetched`).
        public var durable: Int64

        /// Bytes not fetched yet.
        public var remaining: Int64 { end - fetched }
        /// Whether every byte is fetched.
        public var isComplete: Bool { fetched >= end }
    }

    /// No range smaller than this is planned at the start (1 MiB); a range being fetched is split
    /// for a free connection while more than this is left of it (SPEC: "no connection idles
    /// while another has more than 1 MiB left").
    public static let minimumSplit: Int64 = 1 << 20
    /// Smaller downloads use one connection (2 MiB).
    public static let minimumSize: Int64 = 2 << 20

    /// The file's size.
    public let total: Int64
    /// The segments, by start; they tile `[0, total)`.
    public private(set) var segments: [Segment]

    /// A fresh plan of up to `connections` equal segments, none under ``minimumSplit``.
    public init(total: Int64, connections: Int) {
        self.total = total
        let n = Int64(max(1, min(Int64(connections), total / Self.minimumSplit)))
        let size = total / n
        segments = (0..<n).map { i in
            let start = i * size
            let end = i == n - 1 ? total : start + size
            return Segment(start: start, end: end, fetched: start, durable: start)
        }
    }

    /// A plan read back from the store: each segment resumes from its durable offset. Nil when
    /// the ranges do not tile `[0, total)`.
    public init?(total: Int64, stored: [(start: Int64, end: Int64, durable: Int64)]) {
        var expect: Int64 = 0
        var segs: [Segment] = []
        for s in stored.sorted(by: { $0.start < $1.start }) {
            guard s.start == expect, s.end > s.start, (s.start...s.end).contains(s.durable) else { return nil }
            segs.append(Segment(start: s.start, end: s.end, fetched: s.durable, durable: s.durable))
            expect = s.end
        }
        guard expect == total, !segs.isEmpty else { return nil }
        self.total = total
        segments = segs
    }

    /// The index of the segment that starts at `start`.
    public func index(of start: Int64) -> Int? { segments.firstIndex { $0.start == start } }

    /// The segment that starts at `start`.
    public func segment(_ start: Int64) -> Segment? { index(of: start).map { segments[$0] } }

    /// Counts `n` bytes written at the segment's fetch offset.
    /// - Returns: how many of them belong to the segment (the rest lies past its end, which a
    ///   split may have moved).
    @discardableResult
    public mutating func advance(_ start: Int64, by n: Int64) -> Int64 {
        guard let i = index(of: start) else { return 0 }
        let take = max(0, min(n, segments[i].remaining))
        segments[i].fetched += take
        return take
    }

    /// Bytes fetched over all segments.
    public var fetchedBytes: Int64 { segments.reduce(0) { $0 + ($1.fetched - $1.start) } }

    /// Bytes durable over all segments.
    public var durableBytes: Int64 { segments.reduce(0) { $0 + ($1.durable - $1.start) } }

    /// Every byte before this is fetched (the digest may read up to here).
    public var contiguousEnd: Int64 { prefix(\.fetched) }

    /// Every byte before this is durable.
    public var durableContiguousEnd: Int64 { prefix(\.durable) }

    private func prefix(_ offset: KeyPath<Segment, Int64>) -> Int64 {
        for s in segments where s[keyPath: offset] < s.end { return s[keyPath: offset] }
        return total
    }

    /// Whether every byte is fetched.
    public var isComplete: Bool { segments.allSatisfy(\.isComplete) }

    /// The fetch offset of each segment now (what a sync started now makes durable).
    public var fetchOffsets: [Int64: Int64] {
        Dictionary(uniqueKeysWithValues: segments.map { ($0.start, $0.fetched) })
    }

    /// A sync that started when the fetch offsets were `offsets` finished: those bytes are
    /// durable. (A segment split meanwhile keeps what falls inside it.)
    public mutating func markDurable(_ offsets: [Int64: Int64]) {
        for i in segments.indices {
            guard let f = offsets[segments[i].start] else { continue }
            segments[i].durable = max(segments[i].durable, min(f, segments[i].end, segments[i].fetched))
        }
    }

    /// Work for a free connection: the start of the segment it should fetch. First an unfinished
    /// segment nobody fetches (`busy` are the starts being fetched), the largest; else the
    /// second half of the largest remainder being fetched, split off as a new segment, if more
    /// than ``minimumSplit`` is left of it. Nil when there is nothing worth taking.
    public mutating func nextWork(busy: Set<Int64>) -> Int64? {
        if let idle = segments.filter({ !$0.isComplete && !busy.contains($0.start) }).max(by: {
            $0.remaining < $1.remaining
        }) {
            return idle.start
        }
        guard
            let i = segments.indices.filter({ busy.contains(segments[$0].start) }).max(by: {
                segments[$0].remaining < segments[$1].remaining
            }), segments[i].remaining > Self.minimumSplit
        else { return nil }
        let mid = segments[i].fetched + segments[i].remaining / 2
        let tail = Segment(start: mid, end: segments[i].end, fetched: mid, durable: mid)
        segments[i].end = mid
        segments.insert(tail, at: i + 1)
        return mid
    }

    // MARK: - Storage

    /// The durable state as stored with the job: `[[start, end, durable], ...]`.
    public var storedText: String {
        "[" + segments.map { "[\($0.start),\($0.end),\($0.durable)]" }.joined(separator: ",") + "]"
    }

    /// Reads ``storedText`` back; nil if it is not a plan for `total`.
    public init?(storedText: String, total: Int64) {
        guard let rows = try? JSONDecoder().decode([[Int64]].self, from: Data(storedText.utf8)),
            rows.allSatisfy({ $0.count == 3 })
        else { return nil }
        self.init(total: total, stored: rows.map { (start: $0[0], end: $0[1], durable: $0[2]) })
    }
}
