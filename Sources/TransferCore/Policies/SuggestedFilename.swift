import Foundation

/// The file name of a download made without `-o` (SPEC "The CLI"): from `Content-Disposition`
/// (`filename*` first, then `filename`; an empty one counts as absent), else from the URL's last
/// path segment, sanitized as one path component.
///
/// Like Alamofire's `suggestedDownloadDestination`, but never trusting the server with a path:
/// whatever the header or URL says, the result is a single, non-hidden component of at most
/// ``maxNameBytes`` bytes.
public enum SuggestedFilename {
    /// The name used when nothing usable is suggested.
    public static let fallbackName = "download"

    /// The longest name, in UTF-8 bytes (`NAME_MAX` on Linux file systems).
    public static let maxNameBytes = 255

    /// The name to save a download under.
    ///
    /// - Parameters:
    ///   - contentDisposition: The response's `Content-Disposition` value, if any.
    ///   - url: The URL the response came from (the effective URL after redirects).
    /// - Returns: The sanitized name: from `Content-Disposition` if it names a non-empty file,
    ///   else from the URL, else ``fallbackName``. A header name that sanitizes to nothing gives
    ///   ``fallbackName``, not the URL's name: the server's choice wins, but never unsafely.
    public static func suggest(contentDisposition: String?, url: String) -> String {
        let raw = contentDisposition.flatMap(fromContentDisposition) ?? fromURL(url) ?? ""
        return sanitize(raw)
    }

    // MARK: - Content-Disposition

    /// The file name a `Content-Disposition` value names, not yet sanitized.
    ///
    /// `filename*` (RFC 6266 / RFC 8187 ext-value, `UTF-8''…` or `ISO-8859-1''…`, percent-encoded)
    /// wins over `filename` (a quoted string with backslash escapes, or a token). A parameter that
    /// is empty, cannot be decoded (bad percent-encoding, invalid UTF-8, an unknown charset) counts
    /// as absent. Parameter names are case-insensitive; the first occurrence of each counts.
    ///
    /// - Parameter value: The header value, e.g. `attachment; filename="a b.txt"`.
    /// - Returns: The name, or `nil` when neither parameter gives one.
    public static func fromContentDisposition(_ value: String) -> String? {
        let params = parameters(ofHeaderValue: value)
        if let ext = params["filename*"], let decoded = decodeExtValue(ext), !decoded.isEmpty {
            return decoded
        }
        if let plain = params["filename"], !plain.isEmpty {
            return plain
        }
        return nil
    }

    /// The parameters of a header value like `type; a=b; c="d"`, names lowercased, first
    /// occurrence kept; quoted values are unquoted. The leading disposition type is skipped.
    static func parameters(ofHeaderValue value: String) -> [String: String] {
        var result: [String: String] = [:]
        let chars = Array(value.unicodeScalars)
        var i = 0

        // Skip the disposition type (`attachment`, `inline`, …).
        while i < chars.count, chars[i] != ";" { i += 1 }

        while i < chars.count {
            // At a ';' or at junk: skip separators and whitespace.
            while i < chars.count, chars[i] == ";" || chars[i] == " " || chars[i] == "\t" { i += 1 }
            guard i < chars.count else { break }

            var name = ""
            while i < chars.count, chars[i] != "=", chars[i] != ";" {
                name.unicodeScalars.append(chars[i])
                i += 1
            }
            name = name.trimmingCharacters(in: .whitespaces).lowercased()
            guard i < chars.count, chars[i] == "=" else { continue }  // a parameter without value
            i += 1
            while i < chars.count, chars[i] == " " || chars[i] == "\t" { i += 1 }

            var paramValue = ""
            if i < chars.count, chars[i] == "\"" {
                i += 1
                while i < chars.count, chars[i] != "\"" {
                    if chars[i] == "\\", i + 1 < chars.count { i += 1 }
                    paramValue.unicodeScalars.append(chars[i])
                    i += 1
                }
                // Skip the closing quote (an unterminated string runs to the end) and anything
                // after it up to the next ';'.
                while i < chars.count, chars[i] != ";" { i += 1 }
            } else {
                while i < chars.count, chars[i] != ";" {
                    paramValue.unicodeScalars.append(chars[i])
                    i += 1
                }
                paramValue = paramValue.trimmingCharacters(in: .whitespaces)
            }
            if !name.isEmpty, result[name] == nil {
                result[name] = paramValue
            }
        }
        return result
    }

    /// Decodes an RFC 8187 ext-value, `charset'language'percent-encoded`.
    ///
    /// - Returns: The text, or `nil` for a malformed value or a charset other than UTF-8 and
    ///   ISO-8859-1 (the two RFC 8187 requires).
    static func decodeExtValue(_ ext: String) -> String? {
        let parts = ext.split(separator: "'", maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        guard let bytes = percentDecodedBytes(parts[2]) else { return nil }
        switch parts[0].lowercased() {
        case "utf-8":
            return String(validating: bytes, as: UTF8.self)
        case "iso-8859-1":
            var text = ""
            text.unicodeScalars.append(contentsOf: bytes.map { Unicode.Scalar($0) })
            return text
        default:
            return nil
        }
    }

    /// The bytes of a percent-encoded string, or `nil` for a `%` not followed by two hex digits.
    static func percentDecodedBytes(_ s: Substring) -> [UInt8]? {
        var bytes: [UInt8] = []
        var it = s.utf8.makeIterator()
        while let b = it.next() {
            if b == UInt8(ascii: "%") {
                guard let h = it.next().flatMap(hexValue), let l = it.next().flatMap(hexValue) else { return nil }
                bytes.append(h << 4 | l)
            } else {
                bytes.append(b)
            }
        }
        return bytes
    }

    private static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return b - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return b - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return b - UInt8(ascii: "A") + 10
        default: return nil
        }
    }

    // MARK: - URL

    /// The URL's last path segment, percent-decoded, not yet sanitized.
    ///
    /// The query and fragment are ignored. A path that is empty or ends with `/`
    /// (`http://h/`, `http://h/dir/`) has no last segment. Percent-encoding that does not decode
    /// to UTF-8 is kept as written.
    ///
    /// - Parameter url: An absolute URL, `scheme://authority/path?query#fragment`.
    /// - Returns: The segment, or `nil` when there is none.
    public static func fromURL(_ url: String) -> String? {
        // Searched on UTF-8 bytes (every delimiter is ASCII): Character-wise searching and
        // Foundation's range(of:) cost more than the rest of naming a download.
        var rest = Substring(url)
        if let fragment = rest.utf8.firstIndex(of: UInt8(ascii: "#")) { rest = rest[..<fragment] }
        if let query = rest.utf8.firstIndex(of: UInt8(ascii: "?")) { rest = rest[..<query] }
        if let authority = afterSchemeSeparator(rest) {
            rest = rest[authority...]
            // The authority runs to the first '/'; without one there is no path.
            guard let pathStart = rest.utf8.firstIndex(of: UInt8(ascii: "/")) else { return nil }
            rest = rest[pathStart...]
        }
        let segment = rest.utf8.lastIndex(of: UInt8(ascii: "/")).map { rest[rest.utf8.index(after: $0)...] } ?? rest
        guard !segment.isEmpty else { return nil }
        if let bytes = percentDecodedBytes(segment), let decoded = String(validating: bytes, as: UTF8.self) {
            return decoded.isEmpty ? nil : decoded
        }
        return String(segment)
    }

    /// The index just past the first `://` of `text`, or nil.
    private static func afterSchemeSeparator(_ text: Substring) -> Substring.Index? {
        let utf8 = text.utf8
        var i = utf8.startIndex
        while let colon = utf8[i...].firstIndex(of: UInt8(ascii: ":")) {
            let rest = utf8[utf8.index(after: colon)...]
            if rest.starts(with: [UInt8(ascii: "/"), UInt8(ascii: "/")]) {
                return utf8.index(colon, offsetBy: 3)
            }
            i = utf8.index(after: colon)
        }
        return nil
    }

    // MARK: - Sanitizing

    /// Makes `name` safe to use as one path component (SPEC "The CLI").
    ///
    /// In order: `/` and `\` become `_`; NUL and control characters (Unicode `Cc`: C0, DEL, C1)
    /// are dropped, and so are the bidirectional controls (`Bidi_Control`: U+202E RIGHT-TO-LEFT
    /// OVERRIDE and its kin, which make `gpj.exe` read as `exe.jpg`); leading dots and spaces are
    /// stripped; the result is cut to at most ``maxNameBytes`` UTF-8 bytes on a character (Unicode
    /// scalar) boundary. An empty result, `.` or `..` becomes ``fallbackName``.
    ///
    /// - Parameter name: An untrusted name from a server or a URL.
    /// - Returns: A non-empty name with no separator, not starting with `.`.
    public static func sanitize(_ name: String) -> String {
        var scalars = String.UnicodeScalarView()
        for c in name.unicodeScalars {
            if c == "/" || c == "\\" {
                scalars.append("_")
            } else if c.properties.generalCategory != .control && !c.properties.isBidiControl {
                scalars.append(c)
            }
        }
        let firstKept = scalars.firstIndex { $0 != "." && $0 != " " } ?? scalars.endIndex
        var result = ""
        var bytes = 0
        for c in scalars[firstKept...] {
            let size = UTF8.width(c)
            guard bytes + size <= maxNameBytes else { break }
            result.unicodeScalars.append(c)
            bytes += size
        }
        if result.isEmpty || result == "." || result == ".." {
            return fallbackName
        }
        return result
    }
}
