import Foundation

/// A `multipart/form-data` body (RFC 7578), after Alamofire's `MultipartFormData`: text fields
/// inline, file parts by path so that they are streamed from disk (``UploadBodyStream``), never
/// loaded whole. The encoded length is known up front, so an upload has a total and sends a
/// `Content-Length`.
///
/// The encoding, for parts P1…Pn:
///
/// ```
/// --BOUNDARY CRLF  Content-Disposition: form-data; name="N"[; filename="F"] CRLF
/// [Content-Type: T CRLF]  CRLF  <bytes> CRLF  --BOUNDARY CRLF  …  <bytes of Pn> CRLF  --BOUNDARY-- CRLF
/// ```
///
/// Names and file names are quoted as the WHATWG HTML standard (and curl) do: `"`, CR and LF
/// become `%22`, `%0D` and `%0A`; other bytes, UTF-8 included, are sent as they are.
public final class MultipartFormData {
    /// The line break of multipart bodies.
    public static let crlf = "\r\n"
    /// The start of every generated boundary; 16 random hex digits follow.
    public static let boundaryPrefix = "aftransfer.boundary."

    /// One part's header block and its content.
    public struct BodyPart: Equatable, Sendable {
        /// The part's header lines (without CRLF), `Content-Disposition` first.
        public var headers: [String]
        /// Where the part's bytes come from.
        public var content: Content
    }

    /// The bytes of a part: in memory, or a file on disk.
    public enum Content: Equatable, Sendable {
        /// Bytes held in memory (a text field).
        case data(Data)
        /// The first `length` bytes of the file at `path`.
        case file(path: String, length: Int64)

        /// The number of bytes.
        public var length: Int64 {
            switch self {
            case .data(let d): return Int64(d.count)
            case .file(_, let length): return length
            }
        }
    }

    /// A piece of the encoded body: consecutive inline bytes are merged into one `data` segment.
    public typealias Segment = Content

    /// The boundary between parts (without the leading `--`).
    public let boundary: String
    /// The parts, in order.
    public private(set) var bodyParts: [BodyPart] = []

    /// The request's `Content-Type`: `multipart/form-data; boundary=…`.
    public var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    /// Creates an empty body.
    ///
    /// - Parameter boundary: The boundary; ``randomBoundary()`` by default. It must not occur in
    ///   any part (a random one does not, with overwhelming probability).
    public init(boundary: String = MultipartFormData.randomBoundary()) {
        self.boundary = boundary
    }

    /// A new random boundary: ``boundaryPrefix`` and 16 hex digits (64 random bits), always 36
    /// characters long.
    public static func randomBoundary() -> String {
        var rng = SystemRandomNumberGenerator()
        let hex = String(rng.next() as UInt64, radix: 16)
        return boundaryPrefix + String(repeating: "0", count: 16 - hex.count) + hex
    }

    // MARK: - Appending

    /// Appends a part whose bytes are in memory (Alamofire's `append(_:withName:fileName:mimeType:)`).
    ///
    /// - Parameters:
    ///   - data: The part's bytes.
    ///   - name: The form field name.
    ///   - fileName: A file name for the `filename` parameter; `nil` (default) for a plain field.
    ///   - mimeType: The part's `Content-Type`; `nil` (default) sends none.
    public func append(_ data: Data, withName name: String, fileName: String? = nil, mimeType: String? = nil) {
        bodyParts.append(
            BodyPart(
                headers: Self.partHeaders(name: name, fileName: fileName, mimeType: mimeType), content: .data(data)))
    }

    /// Appends a file part streamed from disk.
    ///
    /// - Parameters:
    ///   - path: The file to read when the body is sent.
    ///   - length: The number of bytes to send (the file's size when it was looked at).
    ///   - name: The form field name.
    ///   - fileName: The `filename` parameter.
    ///   - mimeType: The part's `Content-Type`.
    public func append(fileAt path: String, length: Int64, withName name: String, fileName: String, mimeType: String) {
        bodyParts.append(
            BodyPart(
                headers: Self.partHeaders(name: name, fileName: fileName, mimeType: mimeType),
                content: .file(path: path, length: length)))
    }

    /// Appends a `--form` part: a field inline, or a file with its `;filename=` (default: the last
    /// path component) and `;type=` (default: ``mimeType(forFileName:path:)``).
    ///
    /// - Parameters:
    ///   - part: The parsed `--form` argument.
    ///   - fileLength: The file's size, for a file part (ignored for a field).
    public func append(_ part: FormPart, fileLength: Int64 = 0) {
        switch part {
        case .field(let name, let value):
            append(Data(value.utf8), withName: name)
        case .file(let name, let path, let contentType, let filename):
            let fileName = filename ?? Self.lastPathComponent(path)
            append(
                fileAt: path, length: fileLength, withName: name, fileName: fileName,
                mimeType: contentType ?? Self.mimeType(forFileName: fileName, path: path))
        }
    }

    /// The type of a file part without `;type=`, as curl chooses it: guessed from the file name
    /// sent, else from the path, else `application/octet-stream`.
    public static func mimeType(forFileName fileName: String, path: String) -> String {
        let byName = MIMEType.guess(forPath: fileName)
        return byName != MIMEType.fallback ? byName : MIMEType.guess(forPath: path)
    }

    // MARK: - Encoding

    /// The encoded body as segments: inline bytes (boundaries, headers, fields) and file ranges.
    public var segments: [Segment] {
        var out: [Segment] = []
        var pending = Data()
        func flush() {
            if !pending.isEmpty { out.append(.data(pending)) }
            pending = Data()
        }
        for (i, part) in bodyParts.enumerated() {
            pending.append(contentsOf: Array(boundaryLine(first: i == 0).utf8))
            pending.append(contentsOf: Array(headerBlock(part).utf8))
            switch part.content {
            case .data(let d):
                pending.append(d)
            case .file:
                flush()
                out.append(part.content)
            }
        }
        pending.append(contentsOf: Array(finalBoundaryLine(empty: bodyParts.isEmpty).utf8))
        flush()
        return out
    }

    /// The number of bytes of the encoded body.
    public var contentLength: Int64 {
        segments.reduce(0) { $0 + $1.length }
    }

    /// The whole encoded body in memory, reading every file part. For tests and small bodies;
    /// uploads stream ``segments`` instead.
    ///
    /// - Throws: A `TransferError` (`source_changed` or `io`) if a file cannot be read whole.
    public func encode() throws -> Data {
        var body = Data()
        for segment in segments {
            switch segment {
            case .data(let d):
                body.append(d)
            case .file(let path, let length):
                guard let handle = FileHandle(forReadingAtPath: path) else {
                    throw TransferError(.io, "cannot open \(path)", retryable: false)
                }
                defer { try? handle.close() }
                let bytes = (try? handle.read(upToCount: Int(length))) ?? Data()
                guard bytes.count == Int(length) else {
                    throw TransferError(.sourceChanged, "\(path) is shorter than \(length) bytes", retryable: false)
                }
                body.append(bytes)
            }
        }
        return body
    }

    // MARK: - Pieces

    /// `--BOUNDARY CRLF` before the first part, `CRLF --BOUNDARY CRLF` between parts.
    private func boundaryLine(first: Bool) -> String {
        (first ? "" : Self.crlf) + "--\(boundary)\(Self.crlf)"
    }

    /// `CRLF --BOUNDARY-- CRLF` after the last part (without the leading CRLF for no parts).
    private func finalBoundaryLine(empty: Bool) -> String {
        (empty ? "" : Self.crlf) + "--\(boundary)--\(Self.crlf)"
    }

    private func headerBlock(_ part: BodyPart) -> String {
        part.headers.map { $0 + Self.crlf }.joined() + Self.crlf
    }

    private static func partHeaders(name: String, fileName: String?, mimeType: String?) -> [String] {
        var disposition = "Content-Disposition: form-data; name=\"\(escapedQuotedString(name))\""
        if let fileName { disposition += "; filename=\"\(escapedQuotedString(fileName))\"" }
        var headers = [disposition]
        if let mimeType { headers.append("Content-Type: \(mimeType)") }
        return headers
    }

    /// `s` ready to go between double quotes in a part header: `"` → `%22`, CR → `%0D`, LF → `%0A`.
    static func escapedQuotedString(_ s: String) -> String {
        var out = ""
        out.reserveCapacity(s.utf8.count)
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "%22"
            case "\r": out += "%0D"
            case "\n": out += "%0A"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }

    private static func lastPathComponent(_ path: String) -> String {
        path.split(separator: "/", omittingEmptySubsequences: true).last.map(String.init) ?? path
    }
}
