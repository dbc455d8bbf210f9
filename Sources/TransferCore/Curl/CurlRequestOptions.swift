/// Everything ``CurlEasy/configure(_:)`` sets on a handle, as Swift values: the attempts build
/// one of these and never see a `CURLOPT_*`.
public struct CurlRequestOptions: Equatable, Sendable {
    /// How the request carries a body.
    public enum Body: Equatable, Sendable {
        /// No request body (GET).
        case none
        /// A streamed body of `length` bytes from ``CurlEasy/onRead``, with `method` (PUT, POST or
        /// another); libcurl reads at most `bufferSize` bytes a callback.
        case upload(method: String, length: Int64, bufferSize: Int)
        /// A `HEAD` request: headers only.
        case head
        /// A request with `method` (`DELETE`) and no body either way.
        case bodiless(method: String)
    }

    /// The default receive buffer: large buffers mean fewer callbacks (the curl CLI uses 100 KB).
    public static let defaultBufferSize = 256 * 1024
    /// The default connect timeout, in seconds.
    public static let defaultConnectTimeout = 30

    /// The URL of this hop.
    public var url: String
    /// Request header lines, `Name: value` (`Name:` alone removes one of libcurl's).
    public var headers: [String] = []
    /// `USER:PASSWORD` for Basic auth.
    public var userPassword: String?
    /// `--cacert`.
    public var caFile: String?
    /// `--pin-pubkey`.
    public var pinnedPublicKey: String?
    /// `--insecure`: no TLS verification.
    public var insecure = false
    /// Keep the certificate chain and call ``CurlEasy/onPrerequest`` on a fresh connection
    /// (`--pin-cert`).
    public var inspectsCertificates = false
    /// A new connection, never a kept-alive one (`CURLOPT_FRESH_CONNECT`).
    public var freshConnection = false
    /// Ask for the bytes from this offset on (`Range: bytes=N-`).
    public var rangeFrom: Int64?
    /// With ``rangeFrom``: the last byte wanted (`Range: bytes=N-M`).
    public var rangeTo: Int64?
    /// Wait for an HTTP/2 connection that can carry this transfer too rather than open another
    /// (libcurl's multiplexing; a segmented download's further ranges).
    public var waitForMultiplexing = false
    /// The request body.
    public var body: Body = .none
    /// libcurl's receive buffer size.
    public var bufferSize = CurlRequestOptions.defaultBufferSize
    /// `User-Agent`.
    public var userAgent = "aftransfer"
    /// Seconds to connect.
    public var connectTimeout = CurlRequestOptions.defaultConnectTimeout

    /// Options for a GET of `url`.
    public init(url: String) { self.url = url }
}
