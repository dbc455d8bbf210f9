/// One line of an HTTP response's header block, as libcurl's header callback hands it over,
/// parsed on bytes (header names are ASCII): Foundation's trimming cost more than the rest of a
/// small download's bookkeeping. Shared by a transfer's own request and a segmented download's
/// further connections.
enum HeaderLine {
    /// A status line (`HTTP/1.1 206 Partial Content`): its code, or nil when unreadable.
    case status(Int?)
    /// The empty line that ends a response's headers.
    case end
    /// A header field: its name lowercased and its value trimmed.
    case field(name: String, value: String)
    /// Anything else (a line without a colon).
    case other

    /// Parses one line (its CR LF included or not).
    static func parse(_ raw: UnsafeRawBufferPointer) -> HeaderLine {
        let bytes = trimmed(raw)
        if bytes.starts(with: httpPrefix) {
            let parts = bytes.split(separator: 0x20, maxSplits: 2)
            return .status(parts.count > 1 ? Int(String(decoding: parts[1], as: UTF8.self)) : nil)
        }
        if bytes.isEmpty { return .end }
        guard let colon = bytes.firstIndex(of: 0x3A) else { return .other }
        let name = String(decoding: trimmed(UnsafeRawBufferPointer(rebasing: bytes[..<colon])), as: UTF8.self)
        let value = trimmed(UnsafeRawBufferPointer(rebasing: bytes[(colon + 1)...]))
        return .field(name: name.lowercased(), value: String(decoding: value, as: UTF8.self))
    }

    /// The start, end and total of a `Content-Range` value: `bytes 100-199/200` → (100, 199, 200);
    /// `bytes */200` → (-1, nil, 200); an unknown total (`/*`) is nil, as is an unreadable end.
    /// Nil when unreadable.
    static func contentRange(_ value: String) -> (start: Int64, end: Int64?, total: Int64?)? {
        let spec = value.split(separator: " ", maxSplits: 1).last.map(String.init) ?? ""
        let halves = spec.split(separator: "/", maxSplits: 1)
        guard halves.count == 2 else { return nil }
        let total = Int64(halves[1])
        if halves[0] == "*" { return (start: -1, end: nil, total: total) }
        let bounds = halves[0].split(separator: "-", maxSplits: 1)
        guard let start = bounds.first.flatMap({ Int64($0) }) else { return nil }
        let end = bounds.count == 2 ? Int64(bounds[1]).flatMap { $0 >= start ? $0 : nil } : nil
        return (start: start, end: end, total: total)
    }

    private static let httpPrefix = Array("HTTP/".utf8)

    /// The bytes without leading and trailing ASCII white space (space, tab, CR, LF).
    private static func trimmed(_ raw: UnsafeRawBufferPointer) -> Slice<UnsafeRawBufferPointer> {
        func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0D || b == 0x0A }
        var lo = raw.startIndex
        var hi = raw.endIndex
        while lo < hi && isSpace(raw[lo]) { lo += 1 }
        while hi > lo && isSpace(raw[hi - 1]) { hi -= 1 }
        return raw[lo..<hi]
    }
}
