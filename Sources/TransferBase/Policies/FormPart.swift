/// One part of a multipart/form-data upload, given curl-style with `--form` (SPEC "The CLI"):
/// `NAME=@FILE[;type=MIME][;filename=NAME]` for a file streamed from disk, `NAME=VALUE` for a
/// text field. Alamofire's `MultipartFormData` body parts.
///
/// Syntax choices (curl's, where it has one):
/// - A value starting with `@` is always a file; there is no way to send a literal leading `@`
///   (curl's `--form-string`), and `<` has no special meaning.
/// - The file path may be double-quoted (`@"/a;b.txt"`, with `\"` and `\\` escapes). Unquoted, it
///   runs to the first `;type=` or `;filename=` (keys are case-insensitive), so other `;` stay in
///   the path.
/// - A `type=` or `filename=` value may be quoted too; unquoted it runs to the next `;type=` or
///   `;filename=`, so `type=text/plain;charset=utf-8` keeps its parameter.
public enum FormPart: Codable, Equatable, Sendable {
    /// A text field, `NAME=VALUE`.
    case field(name: String, value: String)
    /// A file part, `NAME=@FILE[;type=MIME][;filename=NAME]`. `contentType` nil means "guess from
    /// the extension" (`MIMEType`, in the daemon); `filename` nil means the file's own last path component.
    case file(name: String, path: String, contentType: String?, filename: String?)

    /// The part's field name.
    public var name: String {
        switch self {
        case .field(let name, _), .file(let name, _, _, _):
            return name
        }
    }

    /// The part written back in `--form` syntax, quoting the path and values when needed, so that
    /// `FormPart.parse(part.spec) == part`. The CLI uses it to send absolute paths.
    public var spec: String {
        switch self {
        case .field(let name, let value):
            return "\(name)=\(value)"
        case .file(let name, let path, let contentType, let filename):
            var s = "\(name)=@\(Self.quotedIfNeeded(path))"
            if let contentType { s += ";type=\(Self.quotedIfNeeded(contentType))" }
            if let filename { s += ";filename=\(Self.quotedIfNeeded(filename))" }
            return s
        }
    }

    /// Parses one `--form` argument.
    ///
    /// - Parameter spec: `NAME=@FILE[;type=MIME][;filename=NAME]` or `NAME=VALUE`.
    /// - Returns: The part. Paths are returned as written; ``RequestValidator`` checks them.
    /// - Throws: `TransferError(.invalidRequest, …)` for a missing `=`; an empty name or
    ///   one with `"`, CR, LF or NUL; NUL in a value; an empty file path; a `type=` that is not
    ///   `type/subtype` or holds CR, LF or NUL; an empty `filename=` or one with CR, LF or NUL; a
    ///   repeated `type=` or `filename=`; text after a quoted string.
    public static func parse(_ spec: String) throws -> FormPart {
        guard let eq = spec.firstIndex(of: "=") else {
            throw refusal("form: missing '=' in a part (NAME=VALUE or NAME=@FILE)")
        }
        let name = String(spec[..<eq])
        guard !name.isEmpty else { throw refusal("form: a part has an empty name") }
        guard !name.unicodeScalars.contains(where: { $0 == "\"" || $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
            throw refusal("form: part name may not contain '\"', CR, LF or NUL")
        }
        let content = spec.unicodeScalars[spec.unicodeScalars.index(after: eq)...]
        guard content.first == "@" else {
            guard !content.contains("\0") else { throw refusal("form \(name): the value contains NUL") }
            return .field(name: name, value: String(content))
        }

        var reader = Reader(Array(content.dropFirst()))
        let path = try reader.readValue(what: "form \(name): the file path")
        guard !path.isEmpty else { throw refusal("form \(name): the file path after '@' is empty") }
        guard !path.unicodeScalars.contains("\0") else { throw refusal("form \(name): the file path contains NUL") }

        var contentType: String?
        var filename: String?
        while let key = reader.readKey() {
            let value = try reader.readValue(what: "form \(name): \(key)=")
            switch key {
            case "type":
                guard contentType == nil else { throw refusal("form \(name): type= given twice") }
                guard isValidMediaType(value) else {
                    throw refusal("form \(name): type= must look like type/subtype")
                }
                contentType = value
            default:
                guard filename == nil else { throw refusal("form \(name): filename= given twice") }
                guard !value.isEmpty else { throw refusal("form \(name): filename= is empty") }
                guard !value.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                    throw refusal("form \(name): filename= contains CR, LF or NUL")
                }
                filename = value
            }
        }
        return .file(name: name, path: path, contentType: contentType, filename: filename)
    }

    /// Whether `value` is `token/token`, optionally followed by `;` parameters, with no control
    /// characters.
    static func isValidMediaType(_ value: String) -> Bool {
        guard !value.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else { return false }
        let essence = value.split(separator: ";", maxSplits: 1, omittingEmptySubsequences: false)[0]
        let halves = essence.trimmingSpaces().split(separator: "/", omittingEmptySubsequences: false)
        return halves.count == 2
            && halves.allSatisfy { !$0.isEmpty && $0.unicodeScalars.allSatisfy(HeaderField.isTokenCharacter) }
    }

    /// `s` in double quotes (with `\\` and `\"` escaped) when curl's `-F` would otherwise split it:
    /// at `;` (the part's parameters) or `,` (several files), or a leading quote.
    private static func quotedIfNeeded(_ s: String) -> String {
        let needsQuotes = s.hasPrefix("\"") || s.contains(";") || s.contains(",")
        guard needsQuotes else { return s }
        let escaped = s.replacingAll("\\", with: "\\\\").replacingAll("\"", with: "\\\"")
        return "\"\(escaped)\""
    }

    fileprivate static func refusal(_ message: String) -> TransferError {
        TransferError(.invalidRequest, message)
    }
}

// MARK: - Reading the file part's options

extension FormPart {
    /// A cursor over the text after `@`: a value, then `;key=value` options.
    private struct Reader {
        private let chars: [Unicode.Scalar]
        private var i = 0
        private static let keys = ["type", "filename"]

        init(_ chars: [Unicode.Scalar]) { self.chars = chars }

        /// Reads a quoted or unquoted value, up to the next `;type=`/`;filename=` or the end.
        mutating func readValue(what: String) throws -> String {
            var value = ""
            if i < chars.count, chars[i] == "\"" {
                i += 1
                var closed = false
                while i < chars.count {
                    if chars[i] == "\\", i + 1 < chars.count {
                        value.unicodeScalars.append(chars[i + 1])
                        i += 2
                    } else if chars[i] == "\"" {
                        closed = true
                        i += 1
                        break
                    } else {
                        value.unicodeScalars.append(chars[i])
                        i += 1
                    }
                }
                guard closed else { throw FormPart.refusal("\(what) has no closing quote") }
                guard i == chars.count || atOption() else {
                    throw FormPart.refusal("\(what): only ;type= or ;filename= may follow a quoted string")
                }
                return value
            }
            while i < chars.count, !atOption() {
                value.unicodeScalars.append(chars[i])
                i += 1
            }
            return value
        }

        /// Reads `;key=` if the cursor is at one, returning the lowercased key.
        mutating func readKey() -> String? {
            guard let key = optionKey(at: i) else { return nil }
            i += 1 + key.unicodeScalars.count + 1
            return key
        }

        private func atOption() -> Bool { optionKey(at: i) != nil }

        /// The key if `;key=` (any case) starts at `index`.
        private func optionKey(at index: Int) -> String? {
            guard index < chars.count, chars[index] == ";" else { return nil }
            for key in Self.keys {
                let end = index + 1 + key.unicodeScalars.count
                guard end < chars.count, chars[end] == "=" else { continue }
                var candidate = ""
                candidate.unicodeScalars.append(contentsOf: chars[(index + 1)..<end])
                if candidate.lowercased() == key { return key }
            }
            return nil
        }
    }
}

extension StringProtocol {
    /// The text without leading and trailing spaces and tabs.
    fileprivate func trimmingSpaces() -> Substring {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return s
    }

    /// The text with every `target` replaced (without Foundation).
    fileprivate func replacingAll(_ target: Character, with replacement: String) -> String {
        var out = ""
        for c in self {
            if c == target { out += replacement } else { out.append(c) }
        }
        return out
    }
}
