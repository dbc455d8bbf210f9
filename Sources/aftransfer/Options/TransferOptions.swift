import ArgumentParser
import TransferBase

/// Options shared by `download` and `upload`: headers, auth, TLS, scheduling, retries, and how
/// to report the new job.
struct TransferOptions: ParsableArguments {
    @Option(
        name: [.customShort("H"), .customLong("header")],
        help: ArgumentHelp("A request header, 'Name: value' (repeatable).", valueName: "header"))
    var headers: [String] = []

    @Option(help: ArgumentHelp("Basic authentication; never printed back.", valueName: "user:password"))
    var user: String?

    // `.unconditional`: a negative priority (`--priority -5`) is a value, not an option.
    @Option(
        parsing: .unconditional, help: ArgumentHelp("Higher runs first; may be negative (default 0).", valueName: "n"))
    var priority: Int?

    // `.unconditional` here and on the other numbers: `--limit-rate -1K` is a bad value, reported as
    // such, not a missing one.
    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Bytes per second, e.g. 500K or 2M (powers of 1024).", valueName: "rate"))
    var limitRate: String?

    @Option(
        parsing: .unconditional,
        help: ArgumentHelp("Retries after a failed attempt (default 8; 0 never repeats a request).", valueName: "n"))
    var retries: Int?

    @Option(help: ArgumentHelp("Trust the CA certificates in this PEM file.", valueName: "file"))
    var cacert: String?

    @Option(help: ArgumentHelp("Public-key pins, 'sha256//BASE64[;sha256//...]'.", valueName: "pins"))
    var pinPubkey: String?

    @Option(help: ArgumentHelp("Require this certificate in the server's chain.", valueName: "file"))
    var pinCert: String?

    @Flag(help: "Do not verify the server's TLS certificate (shown in status).")
    var insecure = false

    @Option(
        help: ArgumentHelp(
            "Run this shell command when the job ends (completed, failed or cancelled): the job as JSON on stdin, "
                + "AFTRANSFER_JOB_ID, AFTRANSFER_STATE and AFTRANSFER_DESTINATION in its environment.",
            valueName: "cmd"))
    var onEnd: String?

    @Flag(help: "Wait for the transfer to end, showing progress on stderr; exit 0 if it completed, 1 if not.")
    var wait = false

    @Flag(help: "Print the job object as JSON instead of the id (with --wait, only the final object).")
    var json = false

    func validate() throws {
        // An empty path would be made absolute as the working directory, and refused as that.
        if cacert?.isEmpty == true { throw ValidationError("--cacert cannot be empty.") }
        if pinCert?.isEmpty == true { throw ValidationError("--pin-cert cannot be empty.") }
    }

    /// Copies these options into `request`, with paths made absolute against the working directory.
    func apply(to request: inout TransferRequest) {
        if !headers.isEmpty { request.headers = headers }
        request.user = user
        request.priority = priority
        request.limitRate = limitRate
        request.retries = retries
        request.cacert = cacert.map(Paths.absolute)
        request.pinPubkey = pinPubkey
        request.pinCert = pinCert.map(Paths.absolute)
        if insecure { request.insecure = true }
        request.onEnd = onEnd
    }
}
