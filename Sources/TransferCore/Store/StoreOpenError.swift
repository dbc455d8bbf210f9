/// Why the job database cannot be opened. The daemon then exits 1 naming the file, and never
/// rewrites or deletes it (SPEC "Disk full and other faults").
public enum StoreOpenError: Error, Equatable, CustomStringConvertible {
    /// The file does not start with SQLite's header.
    case notADatabase
    /// SQLite's integrity check found damage (its first finding).
    case corrupt(String)
    /// Written by a newer aftransfer: migrations this one does not know, or a `user_version`.
    case newerVersion(String)
    /// The file cannot be read (permissions, I/O error).
    case unreadable(String)

    /// A message for people.
    public var description: String {
        switch self {
        case .notADatabase: return "not an SQLite database (the file is damaged or is something else)"
        case .corrupt(let finding): return "the database is damaged (\(finding))"
        case .newerVersion(let what):
            return "written by a newer version of aftransfer (\(what)); use that version or move the file away"
        case .unreadable(let why): return "cannot read it: \(why)"
        }
    }
}
