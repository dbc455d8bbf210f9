/// A part file to be deleted, recorded in the transaction that makes its job cancelled or removes
/// it (`doomed_part`), and forgotten once the file is gone. The row change is written before the
/// file is deleted (a command is decided and written first, acted on after), so a crash in between
/// would leave the part for good: SPEC's "cancelled … partial data removed". The daemon deletes
/// what is left at its next start (``Engine/recover()``).
public struct DoomedPart: Equatable, Sendable {
    /// The part file's path.
    public var path: String
    /// The download destination (or upload response file) it is the part of: while an unfinished
    /// job holds that destination again, the part is that job's and is left alone.
    public var destination: String

    /// Creates a record.
    public init(path: String, destination: String) {
        self.path = path
        self.destination = destination
    }
}
