/// Stable error codes of the job object's `error.code` (SPEC). Never rename; only add.
public enum TransferErrorCode: String, Codable, Sendable, CaseIterable {
    /// A connection, DNS, reset or partial-transfer failure (retryable).
    case network
    /// A timeout or a stall (retryable).
    case timeout
    /// A status other than 2xx.
    case httpStatus = "http_status"
    /// TLS evaluation or pinning failed.
    case tls
    /// A refused redirect, or more than 10.
    case redirect
    /// The file's SHA-256 is not the expected one.
    case checksum
    /// The destination exists (without `--replace`) or another job targets it.
    case destinationExists = "destination_exists"
    /// The destination's directory is missing (without `--create-dirs`).
    case destinationMissingDir = "destination_missing_dir"
    /// No space left on the device.
    case diskFull = "disk_full"
    /// Another file-system failure.
    case io
    /// An upload's source changed (size or mtime) since it was queued.
    case sourceChanged = "source_changed"
    /// Refused input.
    case invalidRequest = "invalid_request"
    /// Cancelled by the user.
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

    /// `error` itself when it is a ``TransferError``, else an `io` error with its description:
    /// what a thrown error becomes when it ends an attempt.
    public static func from(_ error: Error, retryable: Bool) -> TransferError {
        error as? TransferError ?? TransferError(.io, "\(error)", retryable: retryable)
    }
}
