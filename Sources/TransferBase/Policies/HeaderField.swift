/// One request header given with `-H 'Name: value'` (the `headers` param of `transfer.add`).
///
/// Parsing follows RFC 9110 §5: the name is a non-empty `token` directly followed by `:`; the
/// value has its optional whitespace (spaces and tabs) trimmed on both sides and may be empty.
/// Control characters other than horizontal tab are refused in the value, so that no header
/// can smuggle a second header or end the request head (CR, LF) or cut a C string (NUL).
public struct HeaderField: Equatable, Sendable {
    /// The field name as given (case preserved; compare case-insensitively).
    public var name: String
    /// The field value, without surrounding optional whitespace.
    public var value: String

    /// Lowercased names of the headers whose values are secrets (SPEC "Security"): stored, but
    /// printed as `***`.
    public static let secretNames: Set<String> = ["authorization", "proxy-authorization", "cookie"]

    /// Lowercased names of the headers the daemon writes itself, refused from the user: the body's
    /// framing (`Content-Length`, `Transfer-Encoding`: a wrong one leaves bytes on a kept-alive
    /// connection for the next, unrelated request) and the ranges resuming asks for (`Range`,
    /// `If-Range`), and the resumable-upload protocols' own fields.
    public static let daemonOwnedNames: Set<String> = [
        "content-length", "transfer-encoding", "range", "if-range", "upload-offset", "upload-complete",
        "upload-incomplete", "upload-length", "upload-draft-interop-version", "tus-resumable",
    ]

    /// What `list`, `status`, `curl` and logs print instead of a secret value.
    public static let redactedValue = "***"

    /// Creates a header from a name and a value, unchecked. Use ``parse(_:)`` for user input.
    ///
    /// - Parameters:
    ///   - name: The field name.
    ///   - value: The field value.
    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    /// Parses one `Name: value` line.
    ///
    /// - Parameter line: The header as the user wrote it, without a line ending.
    /// - Returns: The header, its value trimmed of surrounding spaces and tabs.
    /// - Throws: `TransferError(.invalidRequest, …)` for a missing colon, an empty name,
    ///   a name with characters other than RFC 9110 `tchar`, or CR, LF, NUL (or another control
    ///   character but tab) anywhere. The message names the header but never echoes its value.
    public static func parse(_ line: String) throws -> HeaderField {
        let scalars = line.unicodeScalars
        guard let colon = scalars.firstIndex(of: ":") else {
            // The line is not echoed: it may be a secret that lost its colon.
            throw refusal("header: missing ':' between name and value")
        }
        let name = String(scalars[scalars.startIndex..<colon])
        guard !name.isEmpty else {
            throw refusal("header: the name before ':' is empty")
        }
        if let bad = name.unicodeScalars.first(where: { !isTokenCharacter($0) }) {
            // Only the offending character is shown: a malformed line may hold a secret.
            throw refusal(
                "header: the name contains \(describe(bad)); it may only hold letters, digits and !#$%&'*+-.^_`|~")
        }
        let rawValue = scalars[scalars.index(after: colon)...]
        if rawValue.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) {
            throw refusal("header \(name): the value contains CR, LF or NUL")
        }
        if rawValue.contains(where: { isControl($0) && $0 != "\t" }) {
            throw refusal("header \(name): the value contains a control character")
        }
        if daemonOwnedNames.contains(name.lowercased()) {
            throw refusal("header \(name): the daemon sets it itself (it frames the body or asks for ranges)")
        }
        let isOptionalWhitespace: (Unicode.Scalar) -> Bool = { $0 == " " || $0 == "\t" }
        var trimmed = rawValue
        while let first = trimmed.first, isOptionalWhitespace(first) { trimmed.removeFirst() }
        while let last = trimmed.last, isOptionalWhitespace(last) { trimmed.removeLast() }
        return HeaderField(name: name, value: String(trimmed))
    }

    /// The last of a request's `-H` lines named `name` (any case), parsed; nil when none.
    package static func last(named name: String, in lines: [String]?) -> HeaderField? {
        let wanted = name.lowercased()
        return (lines ?? []).lazy.compactMap { try? HeaderField.parse($0) }.last { $0.name.lowercased() == wanted }
    }

    /// Whether the value is a secret (`Authorization`, `Proxy-Authorization`, `Cookie`, in any
    /// case) that is printed as `***`.
    public var isSecret: Bool {
        Self.secretNames.contains(name.lowercased())
    }

    /// The header as a line, `Name: value`.
    public var line: String {
        "\(name): \(value)"
    }

    /// The header as a line fit for printing: `Name: ***` when ``isSecret``, else ``line``.
    public var redactedLine: String {
        isSecret ? "\(name): \(Self.redactedValue)" : line
    }

    /// Whether `c` is an RFC 9110 `tchar`.
    static func isTokenCharacter(_ c: Unicode.Scalar) -> Bool {
        switch c {
        case "a"..."z", "A"..."Z", "0"..."9":
            return true
        case "!", "#", "$", "%", "&", "'", "*", "+", "-", ".", "^", "_", "`", "|", "~":
            return true
        default:
            return false
        }
    }

    /// Whether `c` is an ASCII control character (C0 or DEL).
    private static func isControl(_ c: Unicode.Scalar) -> Bool {
        c.value < 0x20 || c.value == 0x7F
    }

    /// A printable description of one character for an error message.
    private static func describe(_ c: Unicode.Scalar) -> String {
        switch c {
        case " ": return "a space"
        case "\t": return "a tab"
        default:
            if isControl(c) || c.value > 0x7E {
                return "U+" + String(c.value, radix: 16, uppercase: true)
            }
            return "'\(c)'"
        }
    }

    private static func refusal(_ message: String) -> TransferError {
        TransferError(.invalidRequest, message)
    }
}
