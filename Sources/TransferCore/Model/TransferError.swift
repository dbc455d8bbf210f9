/// Stable error codes of the job object's `error.code` (SPEC). Never rename; only add.
public enum TransferErrorCode: String, Codable, Sendable, CaseIterable {
    case network
    case timeout
    case httpStatus = "http_status"
    case tls
    case redirect
    case checksum
    case destinationExists = "destination_exists"
    case destinationMissingDir = "destination_missing_dir"
    case diskFull = "disk_full"
    case io
    case sourceChanged = "source_changed"
    case invalidRequest = "invalid_request"
    case cancelled
}

/// An error of a job or of a request: a stable code, a message for people, and whether the
/// retry policy will try again.
public struct TransferError: Error, Codable, Sendable, Equatable {
    /// The stable code.
    public var code: TransferErrorCode
    /// A message for people.
    public var message: String
    /// Whether this failure is retried by the policy.
    public var retryable: Bool

    /// Creates an error; `retryable` defaults to the code's usual class.
    public init(_ code: TransferErrorCode, _ message: String, retryable: Bool? = nil) {
        self.code = code
        self.message = message
        self.retryable = retryable ?? [.network, .timeout].contains(code)
    }
}
