import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Checks the params of `transfer.add` before anything is queued (SPEC "Security": "a bad URL,
/// scheme, header or path is refused at enqueue with exit status 2") and returns them normalized.
///
/// The only I/O is `stat`/`lstat`/`access` of the paths named: nothing is created or opened.
/// Destination checks are repeated by the daemon when a download ends (the file system may have
/// changed in between).
///
/// Normalization: `kind` is set (`download` by default) and lowercased; the URL is trimmed and
/// its scheme lowercased; `method` is set and uppercased (`GET`; `PUT`, or `POST` with a form);
/// `sha256` is lowercased; an empty `form` becomes `nil`. Everything else is returned as given.
public enum RequestValidator {
    /// The longest URL accepted, in UTF-8 bytes (8 KiB).
    public static let maxURLBytes = 8 * 1024
    /// The accepted `priority` values.
    public static let priorityRange = -1_000_000...1_000_000
    /// The accepted `retries` values.
    public static let retriesRange = 0...1000
    /// The connections a download may use (`-x`).
    public static let connectionsRange = 1...16

    /// Validates and normalizes a `transfer.add` request.
    ///
    /// - Parameter request: The params as received (paths already absolute).
    /// - Returns: The normalized request.
    /// - Throws: `TransferError(code, message)`: `invalid_request` for malformed input,
    ///   `destination_exists` for an existing target without `replace`, `destination_missing_dir`
    ///   for a missing directory without `createDirs`. The message starts with the field's name.
    ///
    /// `certificates` reads a `--cacert` or `--pin-cert` file as the TLS library does: the daemon
    /// passes OpenSSL's reader. The CLI, which links no TLS library, passes nil: a file whose PEM
    /// block holds no readable certificate then passes here, and the daemon refuses it.
    public static func validate(
        _ request: TransferRequest, certificates: CertificateCounter?
    ) throws -> TransferRequest {
        var known = Set<String>()
        return try validate(request, knownDirectories: &known, certificates: certificates)
    }

    /// How many certificates a PEM text holds as the TLS library reads them; nil when one of its
    /// blocks is damaged.
    public typealias CertificateCounter = ([UInt8]) -> Int?

    /// Validates one request of a list, as ``validate(_:certificates:)``; `knownDirectories` are the
    /// directories earlier requests of the same list found to be directories (the ones this
    /// request finds are added), so that a list of thousands of downloads into one directory
    /// looks at it once, not once a request.
    public static func validate(
        _ request: TransferRequest, knownDirectories: inout Set<String>, certificates: CertificateCounter?
    ) throws -> TransferRequest {
        var r = request

        // kind
        let kind = (r.kind ?? "download").lowercased()
        guard kind == "download" || kind == "upload" else {
            throw invalid("kind: must be \"download\" or \"upload\", not \"\(printable(r.kind ?? ""))\"")
        }
        r.kind = kind
        let isUpload = kind == "upload"

        r.url = try validateURL(r.url)

        // method
        if isUpload {
            let hasForm = !(r.form ?? []).isEmpty
            let method = (r.method ?? (hasForm ? "POST" : "PUT")).uppercased()
            guard method == "PUT" || method == "POST" else {
                throw invalid("method: an upload uses PUT or POST, not \"\(printable(r.method ?? ""))\"")
            }
            r.method = method
        } else {
            let method = (r.method ?? "GET").uppercased()
            guard method == "GET" else {
                throw invalid("method: a download uses GET, not \"\(printable(r.method ?? ""))\"")
            }
            r.method = method
        }

        // Every path, before any is looked at.
        let pathFields: [(String, String?)] = [
            ("destination", r.destination), ("directory", r.directory), ("source", r.source),
            ("response", r.response), ("cacert", r.cacert), ("pinCert", r.pinCert),
        ]
        for case (let field, let path?) in pathFields {
            try checkAbsolute(path, field: field)
        }

        if r.form?.isEmpty == true { r.form = nil }
        if isUpload {
            try validateUpload(r, knownDirectories: &knownDirectories)
            if let given = r.resumable {
                guard let mode = ResumableMode(rawValue: given.lowercased()) else {
                    throw invalid("resumable: must be \"auto\", \"tus\" or \"off\", not \"\(printable(given))\"")
                }
                if mode == .tus && r.form != nil {
                    throw invalid("resumable: tus sends a source file, not form parts")
                }
                r.resumable = mode.rawValue
            }
            if r.sha256 != nil && r.form != nil {
                throw invalid("sha256: applies to a source file, not to form parts")
            }
        } else {
            if r.resumable != nil { throw invalid("resumable: only applies to uploads") }
            try validateDownload(r, knownDirectories: &knownDirectories)
        }

        for header in r.headers ?? [] {
            let field = try HeaderField.parse(header)
            // SPEC: downloads ask for `Accept-Encoding: identity`, so that offsets are byte
            // offsets; another coding would be silently replaced, so it is refused.
            if !isUpload && field.name.lowercased() == "accept-encoding" && !Self.asksForIdentity(field.value) {
                throw invalid(
                    "header \(field.name): a download asks for identity (resumed offsets and --sha256 are of the bytes as sent)"
                )
            }
        }

        if let user = r.user {
            guard user.contains(":") else {
                throw invalid("user: must be USER:PASSWORD")
            }
            guard !user.unicodeScalars.contains(where: { $0 == "\r" || $0 == "\n" || $0 == "\0" }) else {
                throw invalid("user: contains CR, LF or NUL")
            }
        }

        if let sha256 = r.sha256 {
            guard sha256.utf8.count == 64, sha256.utf8.allSatisfy(isHexDigit) else {
                throw invalid("sha256: must be 64 hexadecimal digits")
            }
            r.sha256 = sha256.lowercased()
        }

        if let priority = r.priority, !priorityRange.contains(priority) {
            throw invalid("priority: must be between \(priorityRange.lowerBound) and \(priorityRange.upperBound)")
        }

        if let limitRate = r.limitRate, RateParser.parse(limitRate) == nil {
            throw invalid("limitRate: \"\(printable(limitRate))\" is not a rate (bytes per second, e.g. 500K or 2M)")
        }

        if let connections = r.connections {
            guard connectionsRange.contains(connections) else {
                throw invalid(
                    "connections: must be between \(connectionsRange.lowerBound) and \(connectionsRange.upperBound)")
            }
            guard r.kind != JobKind.upload.rawValue else { throw invalid("connections: only for downloads") }
        }

        if let retries = r.retries, !retriesRange.contains(retries) {
            throw invalid("retries: must be between \(retriesRange.lowerBound) and \(retriesRange.upperBound)")
        }

        if let cacert = r.cacert { try checkCertificateFile(cacert, field: "cacert", certificates: certificates) }
        if let pinCert = r.pinCert { try checkCertificateFile(pinCert, field: "pinCert", certificates: certificates) }
        if let pinPubkey = r.pinPubkey { try validatePinPubkey(pinPubkey) }

        if let onEnd = r.onEnd {
            guard !onEnd.trimmingCharacters(in: .whitespacesAndNewlines).isEmpty else {
                throw invalid("onEnd: is empty")
            }
            guard !onEnd.unicodeScalars.contains("\0"), onEnd.utf8.count <= maxOnEndBytes else {
                throw invalid("onEnd: contains NUL or is longer than \(maxOnEndBytes) bytes")
            }
        }

        return r
    }

    /// The longest `onEnd` command accepted, in bytes.
    public static let maxOnEndBytes = 64 * 1024

    /// Validates a URL as `transfer.add` does (`transfer.setUrl`).
    /// - Returns: the trimmed URL with its scheme lowercased.
    /// - Throws: `invalid_request` naming `url`.
    public static func validatedURL(_ raw: String) throws -> String { try validateURL(raw) }

    // MARK: - URL

    /// The trimmed URL with its scheme lowercased, or a refusal.
    private static func validateURL(_ raw: String) throws -> String {
        // Most URLs are printable ASCII: then there is nothing to trim and no space or control
        // character to look for (Unicode properties per scalar were a tenth of queuing 100,000 URLs),
        // and most are plain enough to be read without Foundation.
        let plain = raw.utf8.allSatisfy { $0 > 0x20 && $0 < 0x7F }
        if plain, raw.utf8.count <= maxURLBytes, let url = PlainHTTPURL.normalized(raw) { return url }
        return try fullyCheckedURL(raw, plain: plain)
    }

    /// ``validateURL(_:)`` without its fast path (``PlainHTTPURL``): `URLComponents` and libcurl's
    /// rules. `plain`: every byte is printable ASCII.
    static func fullyCheckedURL(_ raw: String, plain: Bool) throws -> String {
        let url = plain ? raw : raw.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !url.isEmpty else { throw invalid("url: is empty") }
        guard url.utf8.count <= maxURLBytes else {
            throw invalid("url: longer than \(maxURLBytes) bytes")
        }
        if !plain,
            url.unicodeScalars.contains(where: {
                $0.properties.isWhitespace || $0.properties.generalCategory == .control
            })
        {
            throw invalid("url: contains a space or a control character (percent-encode it)")
        }
        guard let components = URLComponents(string: url), let scheme = components.scheme else {
            throw invalid("url: \"\(URLRedaction.redact(url))\" is not an absolute URL")
        }
        let lowerScheme = scheme.lowercased()
        guard lowerScheme == "http" || lowerScheme == "https" else {
            throw invalid("url: scheme \"\(printable(scheme))\" is not supported (only http and https)")
        }
        guard url.hasPrefix(scheme + "://"), let host = components.host, !host.isEmpty else {
            throw invalid("url: \"\(URLRedaction.redact(url))\" has no host")
        }
        if let port = components.port, !(1...65535).contains(port) {
            throw invalid("url: port \(port) is out of range")
        }
        if let problem = authorityProblem(url.utf8.dropFirst(scheme.utf8.count + 3)) {
            throw invalid("url: \"\(URLRedaction.redact(url))\" \(problem)")
        }
        return lowerScheme + url.dropFirst(scheme.count)
    }

    /// Bytes libcurl refuses in a host name once it is percent-decoded (`hostname_check` of its URL
    /// parser), as a table indexed by the byte: a URL with one would be queued only to fail as
    /// malformed.
    private static let badHostBytes: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        for b in "\r\n\t /:#?!@{}[]\\$'\"^`*<>=;,+&()%".utf8 { table[Int(b)] = true }
        return table
    }()

    /// What libcurl would refuse in the authority (the text after `scheme://`) that URLComponents
    /// lets through: a port too long for an integer (it has no `port` then), an IPv6 literal that
    /// is not one, a host with a character curl refuses. Nil when there is nothing to say.
    ///
    /// Read in place, byte by byte: it runs for every line of a list (a copy of the authority, a
    /// filter and Foundation's percent-decoding of every host were a tenth of queuing 2,000 URLs).
    private static func authorityProblem(_ rest: Substring.UTF8View) -> String? {
        let bytes = Array(rest.prefix { $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") })
        return bytes.withUnsafeBufferPointer { authorityProblem(in: $0[...]) }
    }

    private static func authorityProblem(in whole: Slice<UnsafeBufferPointer<UInt8>>) -> String? {
        var authority = whole
        // libcurl ends the user name and password at the first `@`: a second one is left in the host.
        if let at = authority.lastIndex(of: UInt8(ascii: "@")) {
            if authority[..<at].contains(UInt8(ascii: "@")) {
                return "has a second @ (write one inside a user name or password as %40)"
            }
            authority = authority[(at + 1)...]
        }
        var port = authority[authority.endIndex...]
        if authority.first == UInt8(ascii: "[") {
            guard let close = authority.firstIndex(of: UInt8(ascii: "]")) else { return "has an unclosed [" }
            var literal = String(decoding: authority[(authority.startIndex + 1)..<close], as: UTF8.self)
            if let zone = literal.range(of: "%25") { literal = String(literal[..<zone.lowerBound]) }
            var address = in6_addr()
            guard inet_pton(AF_INET6, literal, &address) == 1 else { return "has a bad IPv6 address in []" }
            let after = authority[(close + 1)...]
            if let colon = after.first {
                guard colon == UInt8(ascii: ":") else { return "has text after its IPv6 address" }
                port = after.dropFirst()
            }
        } else {
            var host = authority
            if let colon = authority.lastIndex(of: UInt8(ascii: ":")) {
                host = authority[..<colon]
                port = authority[(colon + 1)...]
            }
            if host.contains(UInt8(ascii: "%")) {
                // Percent-escapes are checked as libcurl sees the name: decoded.
                let decoded = String(decoding: host, as: UTF8.self).removingPercentEncoding.map { Array($0.utf8) }
                guard let decoded, !decoded.contains(where: { badHostBytes[Int($0)] }) else {
                    return "has a character its host name cannot have"
                }
            } else if host.contains(where: { badHostBytes[Int($0)] }) {
                return "has a character its host name cannot have"
            }
        }
        guard port.allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) }) else {
            return "has a port that is not a number"
        }
        let digits = port.drop(while: { $0 == UInt8(ascii: "0") })
        if !port.isEmpty
            && (digits.isEmpty || digits.count > 5 || Int(String(decoding: digits, as: UTF8.self))! > 65535)
        {
            return "has a port out of range (1 to 65535)"
        }
        return nil
    }

    // MARK: - Downloads

    private static func validateDownload(_ r: TransferRequest, knownDirectories: inout Set<String>) throws {
        for (field, given) in [("source", r.source != nil), ("form", r.form != nil), ("response", r.response != nil)]
        where given {
            throw invalid("\(field): only applies to uploads")
        }
        let createDirs = r.createDirs ?? false
        switch (r.destination, r.directory) {
        case (.some, .some):
            throw invalid("destination: give either destination (-o) or directory (-d), not both")
        case (nil, nil):
            throw invalid("destination: a download needs a destination (-o) or a directory (-d)")
        case (let destination?, nil):
            try checkTargetFile(
                destination, field: "destination", createDirs: createDirs, replace: r.replace ?? false,
                knownDirectories: &knownDirectories)
        case (nil, let directory?):
            if knownDirectories.contains(directory) { return }
            switch FileKind(path: directory) {
            case .directory:
                knownDirectories.insert(directory)
            case .missing:
                guard createDirs else {
                    throw TransferError(
                        .destinationMissingDir, "directory: \(printable(directory)) does not exist (use --create-dirs)")
                }
                try checkCreatable(directory, field: "directory")
            case .inaccessible(let reason):
                throw invalid("directory: cannot inspect \(printable(directory)): \(reason)")
            case .regular, .other:
                throw invalid("directory: \(printable(directory)) is not a directory")
            }
        }
    }

    /// Checks a file the daemon will create (a download's destination, an upload's response).
    private static func checkTargetFile(
        _ path: String, field: String, createDirs: Bool, replace: Bool, knownDirectories: inout Set<String>
    ) throws {
        guard !path.hasSuffix("/") else {
            throw invalid("\(field): \(printable(path)) names a directory, not a file")
        }
        // lstat: a dangling symlink still occupies the name.
        switch FileKind(path: path, followingLinks: false) {
        case .missing:
            break
        case .inaccessible(let reason):
            throw invalid("\(field): cannot inspect \(printable(path)): \(reason)")
        case .directory, .regular, .other:
            if case .directory = FileKind(path: path) {
                throw invalid("\(field): \(printable(path)) is a directory")
            }
            guard replace else {
                throw TransferError(
                    .destinationExists, "\(field): \(printable(path)) already exists (use --replace)")
            }
        }
        let parent = parentDirectory(of: path)
        if knownDirectories.contains(parent) { return }
        switch FileKind(path: parent) {
        case .directory:
            knownDirectories.insert(parent)
        case .missing:
            guard createDirs else {
                throw TransferError(
                    .destinationMissingDir,
                    "\(field): directory \(printable(parent)) does not exist (use --create-dirs)")
            }
            try checkCreatable(parent, field: field)
        case .inaccessible(let reason):
            throw invalid("\(field): cannot inspect \(printable(parent)): \(reason)")
        case .regular, .other:
            throw TransferError(.destinationMissingDir, "\(field): \(printable(parent)) is not a directory")
        }
    }

    /// Checks that a missing directory could be created: its nearest existing ancestor is a
    /// directory.
    private static func checkCreatable(_ directory: String, field: String) throws {
        var ancestor = parentDirectory(of: directory)
        while true {
            switch FileKind(path: ancestor) {
            case .directory:
                return
            case .missing where ancestor != "/":
                ancestor = parentDirectory(of: ancestor)
            case .inaccessible(let reason):
                throw invalid("\(field): cannot inspect \(printable(ancestor)): \(reason)")
            default:
                throw TransferError(
                    .destinationMissingDir,
                    "\(field): cannot create \(printable(directory)): \(printable(ancestor)) is not a directory")
            }
        }
    }

    // MARK: - Uploads

    private static func validateUpload(_ r: TransferRequest, knownDirectories: inout Set<String>) throws {
        for (field, given) in [("destination", r.destination != nil), ("directory", r.directory != nil)] where given {
            throw invalid("\(field): only applies to downloads (use response to save the answer)")
        }
        switch (r.source, r.form) {
        case (.some, .some):
            throw invalid("source: give either a source file or form parts, not both")
        case (nil, nil):
            throw invalid("source: an upload needs a source file or form parts")
        case (let source?, nil):
            try checkReadableFile(source, field: "source")
        case (nil, let form?):
            for spec in form {
                if case .file(let name, let path, _, _) = try FormPart.parse(spec) {
                    try checkAbsolute(path, field: "form \(name)")
                    try checkReadableFile(path, field: "form \(name)")
                }
            }
        }
        if let response = r.response {
            // For an upload, createDirs and replace are about the response file.
            try checkTargetFile(
                response, field: "response", createDirs: r.createDirs ?? false, replace: r.replace ?? false,
                knownDirectories: &knownDirectories)
        }
    }

    // MARK: - TLS

    private static func validatePinPubkey(_ value: String) throws {
        let pins = value.split(separator: ";", omittingEmptySubsequences: false)
        for pin in pins {
            // No spaces: libcurl compares each pin as written, so " sha256//…" would never match.
            guard pin.hasPrefix("sha256//"), let digest = Data(base64Encoded: String(pin.dropFirst(8))),
                digest.count == 32
            else {
                throw invalid(
                    "pinPubkey: each pin must be sha256// followed by the base64 of 32 bytes, separated by ';' (no spaces)"
                )
            }
        }
    }

    // MARK: - Paths

    private static func checkAbsolute(_ path: String, field: String) throws {
        guard !path.unicodeScalars.contains("\0") else { throw invalid("\(field): the path contains NUL") }
        guard path.hasPrefix("/") else { throw invalid("\(field): \"\(printable(path))\" is not an absolute path") }
    }

    /// Checks an existing regular file the daemon will read.
    private static func checkReadableFile(_ path: String, field: String) throws {
        switch FileKind(path: path) {
        case .regular:
            guard access(path, R_OK) == 0 else {
                throw invalid("\(field): \(printable(path)) is not readable: \(String(cString: strerror(errno)))")
            }
        case .missing:
            throw invalid("\(field): \(printable(path)) does not exist")
        case .directory:
            throw invalid("\(field): \(printable(path)) is a directory, not a file")
        case .other:
            throw invalid("\(field): \(printable(path)) is not a regular file")
        case .inaccessible(let reason):
            throw invalid("\(field): cannot inspect \(printable(path)): \(reason)")
        }
    }

    /// The largest certificate file read to check it (a CA bundle is a few hundred KiB).
    static let certificateFileLimit = 4 << 20

    /// Checks a `--cacert` or `--pin-cert` file: readable, and holding at least one PEM
    /// certificate (what libcurl and the pin read), so that a wrong file is refused at once
    /// rather than failing every attempt with `tls`.
    private static func checkCertificateFile(_ path: String, field: String, certificates: CertificateCounter?) throws {
        try checkReadableFile(path, field: field)
        guard let handle = FileHandle(forReadingAtPath: path) else {
            throw invalid("\(field): \(printable(path)) is not readable")
        }
        defer { try? handle.close() }
        let data = (try? handle.read(upToCount: certificateFileLimit)) ?? Data()
        guard !PEMText.certificateBodies(String(decoding: data, as: UTF8.self)).isEmpty else {
            throw invalid("\(field): \(printable(path)) holds no PEM certificate (-----BEGIN CERTIFICATE-----)")
        }
        // (A file past the limit was read in part: its last block may be cut, not damaged.)
        guard let certificates, data.count < certificateFileLimit else { return }
        guard (certificates(Array(data)) ?? 0) > 0 else {
            throw invalid("\(field): \(printable(path)) holds a PEM certificate that cannot be read (damaged)")
        }
    }

    /// The directory holding `path` (absolute, no trailing `/`); `/` for a top-level name.
    private static func parentDirectory(of path: String) -> String {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard let slash = trimmed.lastIndex(of: "/"), slash != trimmed.startIndex else { return "/" }
        return String(trimmed[..<slash])
    }

    /// What `stat` (or `lstat`) says is at a path.
    private enum FileKind {
        case missing
        case directory
        case regular
        case other
        case inaccessible(String)

        init(path: String, followingLinks: Bool = true) {
            var info = stat()
            let rc = followingLinks ? stat(path, &info) : lstat(path, &info)
            guard rc == 0 else {
                let code = errno
                self = (code == ENOENT || code == ENOTDIR) ? .missing : .inaccessible(String(cString: strerror(code)))
                return
            }
            switch info.st_mode & S_IFMT {
            case S_IFDIR: self = .directory
            case S_IFREG: self = .regular
            default: self = .other
            }
        }
    }

    // MARK: - Helpers

    private static func isHexDigit(_ b: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(b) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(b)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(b)
    }

    /// Untrusted text shortened, its control characters shown (``PrintableText``), for a message.
    private static func printable(_ s: String) -> String {
        let limit = 100
        let kept = String(String.UnicodeScalarView(s.unicodeScalars.prefix(limit)))
        return PrintableText.of(kept) + (s.unicodeScalars.count > limit ? "…" : "")
    }

    /// Whether an `Accept-Encoding` value asks for no other coding than identity: empty (curl's
    /// `-H 'Accept-Encoding:'`), or only `identity` (with parameters such as `;q=1`).
    static func asksForIdentity(_ value: String) -> Bool {
        value.split(separator: ",").allSatisfy { coding in
            coding.split(separator: ";", maxSplits: 1).first.map {
                $0.trimmingCharacters(in: .whitespaces).lowercased() == "identity"
            } ?? true
        }
    }

    private static func invalid(_ message: String) -> TransferError {
        TransferError(.invalidRequest, message)
    }
}
