/// The params of `transfer.add` (SPEC "The RPC"): the CLI's options, with absolute paths.
/// The daemon validates them (``RequestValidator``) exactly as the CLI does.
public struct TransferRequest: Codable, Sendable, Equatable {
    /// `"download"` (default) or `"upload"`.
    public var kind: String?
    /// The URL (http or https); its scheme is lowercased by ``RequestValidator``.
    public var url: String
    /// `GET` for downloads; `PUT` (default) or `POST` for uploads (`POST` for forms).
    public var method: String?
    /// Download: the target file (absolute). Mutually exclusive with `directory`.
    public var destination: String?
    /// Download: the directory for a suggested file name (absolute).
    public var directory: String?
    /// Download or `--response`: create missing parent directories (`--create-dirs`).
    public var createDirs: Bool?
    /// Download or `--response`: replace an existing file (`--replace`).
    public var replace: Bool?
    /// Raw header lines, `Name: value`.
    public var headers: [String]?
    /// `USER:PASSWORD` for Basic auth.
    public var user: String?
    /// Expected hex SHA-256 of the finished file.
    public var sha256: String?
    /// Higher runs first (`--priority`, default 0; may be negative).
    public var priority: Int?
    /// Bytes per second (`"500K"`, `"2M"` or a plain number).
    public var limitRate: String?
    /// Retries after a failed attempt (`--retries`, default 8; 0 never repeats a request).
    public var retries: Int?
    /// Upload: the source file (absolute).
    public var source: String?
    /// Upload: multipart parts, each `NAME=@FILE[;type=MIME][;filename=NAME]` or `NAME=VALUE`.
    public var form: [String]?
    /// Upload: where to save the response body (absolute).
    public var response: String?
    /// A PEM file of CA certificates to trust (`--cacert`, absolute).
    public var cacert: String?
    /// Public-key pins, `sha256//BASE64[;sha256//...]` (`--pin-pubkey`).
    public var pinPubkey: String?
    /// A PEM certificate the server's chain must contain (`--pin-cert`, absolute).
    public var pinCert: String?
    /// Turn off TLS verification (`--insecure`; shown in the job object).
    public var insecure: Bool?
    /// Upload: `"auto"` (IETF resumable uploads, the default), `"tus"` (tus 1.0.0) or `"off"`.
    public var resumable: String?
    /// A shell command run (`/bin/sh -c`) when the job ends, the job object on its stdin.
    public var onEnd: String?
    /// Download: connections to fetch it over (1–16; `-x`); nil: the daemon's `--connections`.
    public var connections: Int?

    /// A request for `url` with every option unset.
    public init(url: String) { self.url = url }

    /// Every member a request may have (`transfer.add`'s params, each of `transfer.addMany`'s
    /// requests): the RPC refuses any other, as the CLI refuses an unknown option, so that a
    /// misspelt `"sha265"` is not a download without its check.
    public static let memberNames: Set<String> = [
        "kind", "url", "method", "destination", "directory", "createDirs", "replace", "headers", "user", "sha256",
        "priority", "limitRate", "retries", "source", "form", "response", "cacert", "pinPubkey", "pinCert",
        "insecure", "resumable", "onEnd", "connections",
    ]

    /// The first member of `params` (in sorted order) that no request has, if any.
    public static func unknownMember(of params: JSONValue?) -> String? {
        guard case .object(let members)? = params else { return nil }
        return members.keys.filter { !memberNames.contains($0) }.min()
    }

    /// Decodes the params as given; `limitRate` may also be a plain number of bytes per second
    /// (docs/rpc.md), as `daemon.limits` takes it.
    public init(from decoder: Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        kind = try c.decodeIfPresent(String.self, forKey: .kind)
        url = try c.decode(String.self, forKey: .url)
        method = try c.decodeIfPresent(String.self, forKey: .method)
        destination = try c.decodeIfPresent(String.self, forKey: .destination)
        directory = try c.decodeIfPresent(String.self, forKey: .directory)
        createDirs = try c.decodeIfPresent(Bool.self, forKey: .createDirs)
        replace = try c.decodeIfPresent(Bool.self, forKey: .replace)
        headers = try c.decodeIfPresent([String].self, forKey: .headers)
        user = try c.decodeIfPresent(String.self, forKey: .user)
        sha256 = try c.decodeIfPresent(String.self, forKey: .sha256)
        priority = try c.decodeIfPresent(Int.self, forKey: .priority)
        if let bytes = try? c.decodeIfPresent(Int64.self, forKey: .limitRate) {
            limitRate = String(bytes)
        } else {
            limitRate = try c.decodeIfPresent(String.self, forKey: .limitRate)
        }
        retries = try c.decodeIfPresent(Int.self, forKey: .retries)
        source = try c.decodeIfPresent(String.self, forKey: .source)
        form = try c.decodeIfPresent([String].self, forKey: .form)
        response = try c.decodeIfPresent(String.self, forKey: .response)
        cacert = try c.decodeIfPresent(String.self, forKey: .cacert)
        pinPubkey = try c.decodeIfPresent(String.self, forKey: .pinPubkey)
        pinCert = try c.decodeIfPresent(String.self, forKey: .pinCert)
        insecure = try c.decodeIfPresent(Bool.self, forKey: .insecure)
        resumable = try c.decodeIfPresent(String.self, forKey: .resumable)
        onEnd = try c.decodeIfPresent(String.self, forKey: .onEnd)
        connections = try c.decodeIfPresent(Int.self, forKey: .connections)
    }
}
