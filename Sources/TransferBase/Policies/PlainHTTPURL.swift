/// The URLs that ``RequestValidator`` may accept without parsing them with Foundation: an http or
/// https URL whose host is a plain DNS name or IPv4 address, with an optional port, and whose path,
/// query and fragment use only characters RFC 3986 allows there. Almost every line of a long list
/// is one; `URLComponents` and the IDNA look at its host were a seventh of queuing 2,000 URLs, in
/// the CLI and again in the daemon (docs/benchmarks.md, twentieth session).
///
/// Anything else — a user name, an IPv6 literal, a percent-escape in the host, an `xn--` label, an
/// unusual character, a port out of range — is left to the full check (`nil` here), which gives
/// the same answer for every URL this accepts (`PlainHTTPURLTests` compares the two) and the
/// refusals with their messages.
enum PlainHTTPURL {
    /// `url` with its scheme lowercased, when it is one of these URLs; nil otherwise.
    static func normalized(_ url: String) -> String? {
        var text = url  // withUTF8 is mutating: it may make the string contiguous
        let found = text.withUTF8 { b -> Int? in
            guard let n = schemeLength(b), var i = hostEnd(b, from: n + 3) else { return nil }
            if i < b.count && b[i] == UInt8(ascii: ":") {
                guard let afterPort = portEnd(b, from: i + 1) else { return nil }
                i = afterPort
            }
            return restIsPlain(b, from: i) ? n : nil
        }
        guard let schemeLength = found else { return nil }
        if url.utf8.prefix(schemeLength).allSatisfy({ $0 >= UInt8(ascii: "a") }) { return url }
        return (schemeLength == 4 ? "http" : "https") + String(url.utf8.dropFirst(schemeLength))!
    }

    /// 4 for `http://`, 5 for `https://`, in any case; nil otherwise.
    private static func schemeLength(_ b: UnsafeBufferPointer<UInt8>) -> Int? {
        guard b.count > 7, b[0] | 0x20 == UInt8(ascii: "h"), b[1] | 0x20 == UInt8(ascii: "t"),
            b[2] | 0x20 == UInt8(ascii: "t"), b[3] | 0x20 == UInt8(ascii: "p")
        else { return nil }
        var n = 4
        if b[4] | 0x20 == UInt8(ascii: "s") { n = 5 }
        guard b.count > n + 3, b[n] == UInt8(ascii: ":"), b[n + 1] == UInt8(ascii: "/"), b[n + 2] == UInt8(ascii: "/")
        else { return nil }
        return n
    }

    /// The end of a host of dot-separated labels of letters, digits and inner single hyphens
    /// (1 to 63 bytes each, 253 in all, no `xn--`), or nil.
    private static func hostEnd(_ b: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var i = start
        var labelStart = start
        while true {
            // One label.
            while i < b.count, isAlnum(b[i]) || b[i] == UInt8(ascii: "-") { i += 1 }
            let length = i - labelStart
            guard length >= 1, length <= 63, b[labelStart] != UInt8(ascii: "-"), b[i - 1] != UInt8(ascii: "-")
            else { return nil }
            for k in labelStart..<(i - 1) where b[k] == UInt8(ascii: "-") && b[k + 1] == UInt8(ascii: "-") {
                return nil  // "--" (an `xn--` label among them) is left to IDNA's rules
            }
            guard i < b.count, b[i] == UInt8(ascii: ".") else { break }
            i += 1
            labelStart = i
        }
        guard i - start <= 253 else { return nil }
        return i
    }

    /// The end of a port of 1 to 5 digits whose value is 1 to 65535, or nil.
    private static func portEnd(_ b: UnsafeBufferPointer<UInt8>, from start: Int) -> Int? {
        var i = start
        var value = 0
        while i < b.count, i - start < 5, b[i] >= UInt8(ascii: "0"), b[i] <= UInt8(ascii: "9") {
            value = value * 10 + Int(b[i] - UInt8(ascii: "0"))
            i += 1
        }
        guard i > start, value >= 1, value <= 65535 else { return nil }
        return i
    }

    /// Whether the path, query and fragment from `start` (to the end) are nothing but RFC 3986's
    /// characters for them: unreserved, sub-delims, `:@/?`, `%` and two hex digits, and one `#`
    /// that starts the fragment. Every byte must be printable ASCII.
    private static func restIsPlain(_ b: UnsafeBufferPointer<UInt8>, from start: Int) -> Bool {
        guard
            start == b.count || b[start] == UInt8(ascii: "/") || b[start] == UInt8(ascii: "?")
                || b[start] == UInt8(ascii: "#")
        else { return false }
        var i = start
        var inFragment = false
        while i < b.count {
            let c = b[i]
            if c == UInt8(ascii: "%") {
                guard i + 2 < b.count, isHex(b[i + 1]), isHex(b[i + 2]) else { return false }
                i += 3
                continue
            }
            if c == UInt8(ascii: "#") {
                if inFragment { return false }
                inFragment = true
            } else if !allowed[Int(c)] {
                return false
            }
            i += 1
        }
        return true
    }

    private static func isAlnum(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "A") && c <= UInt8(ascii: "Z"))
            || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
    }

    private static func isHex(_ c: UInt8) -> Bool {
        (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
            || (c | 0x20 >= UInt8(ascii: "a") && c | 0x20 <= UInt8(ascii: "f"))
    }

    /// Unreserved, sub-delims, `:`, `@`, `/` and `?`, by byte.
    private static let allowed: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        for c in UInt8(ascii: "a")...UInt8(ascii: "z") { table[Int(c)] = true }
        for c in UInt8(ascii: "A")...UInt8(ascii: "Z") { table[Int(c)] = true }
        for c in UInt8(ascii: "0")...UInt8(ascii: "9") { table[Int(c)] = true }
        for c in "-._~!$&'()*+,;=:@/?".utf8 { table[Int(c)] = true }
        return table
    }()
}
