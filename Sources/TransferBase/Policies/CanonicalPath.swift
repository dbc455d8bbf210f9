import Foundation

/// One spelling for each file a job holds: a destination (or `--response` file) written through a
/// symbolic link to its directory, with `..`, `.` or a doubled `/`, names the same file as the
/// plain path, and two jobs must not hold one file under two names (both would write one part,
/// and one of them would complete with the other's bytes). The daemon keeps the spelling this
/// gives; the existing directories of a path are resolved by `realpath(3)`, the components that do
/// not exist yet (`--create-dirs`) are appended with `.` and `..` taken out as text.
package enum CanonicalPath {
    /// `path` (absolute) with its directory resolved; the last component is kept as it is (a
    /// symbolic link there is the file `--replace` replaces). A path that does not end in a name
    /// (`/`, `.`, `..`) comes back unchanged, for the validator to refuse.
    /// - Parameter cache: directories resolved before, by their spelling (one list's requests
    ///   share their directory: it is resolved once).
    package static func file(_ path: String, cache: inout [String: String]) -> String {
        guard path.hasPrefix("/"), let slash = path.lastIndex(of: "/") else { return path }
        let name = String(path[path.index(after: slash)...])
        guard !name.isEmpty, name != ".", name != ".." else { return path }
        let directory = slash == path.startIndex ? "/" : String(path[..<slash])
        return join(self.directory(directory, cache: &cache), name)
    }

    /// Symbolic links followed at most, as the kernel does (`MAXSYMLINKS`).
    static let maxLinks = 40

    /// A directory's path (absolute), resolved as ``file(_:cache:)`` resolves a file's.
    package static func directory(_ path: String, cache: inout [String: String]) -> String {
        directory(path, cache: &cache, links: 0)
    }

    private static func directory(_ path: String, cache: inout [String: String], links: Int) -> String {
        guard path.hasPrefix("/") else { return path }
        if let known = cache[path] { return known }
        let resolved: String
        if let real = realpath(path, nil) {
            resolved = String(cString: real)
            free(real)
        } else if errno == ENOENT, let cut = lastComponent(of: path) {
            // Not there yet: its parent resolved, this component appended as text, or, when it
            // is a link to a directory still to be made (`--create-dirs` makes it through the
            // link), the link's target resolved in its place.
            let base = directory(cut.parent, cache: &cache, links: links)
            switch cut.name {
            case ".": resolved = base
            case "..": resolved = lastComponent(of: base)?.parent ?? base
            default:
                let here = join(base, cut.name)
                if links < maxLinks, let target = linkTarget(here) {
                    resolved = directory(
                        target.hasPrefix("/") ? target : join(base, target), cache: &cache, links: links + 1)
                } else {
                    resolved = here
                }
            }
        } else {
            resolved = path  // unreadable: the validator has said what it could
        }
        cache[path] = resolved
        return resolved
    }

    /// What the symbolic link at `path` points to, or nil when `path` is not a link.
    private static func linkTarget(_ path: String) -> String? {
        var buffer = [CChar](repeating: 0, count: Int(PATH_MAX) + 1)
        let n = readlink(path, &buffer, buffer.count - 1)
        guard n > 0 else { return nil }
        return String(decoding: buffer[..<n].map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// The parent and the last name of an absolute path (trailing slashes ignored); nil for `/`.
    private static func lastComponent(of path: String) -> (parent: String, name: String)? {
        var trimmed = Substring(path)
        while trimmed.count > 1, trimmed.hasSuffix("/") { trimmed = trimmed.dropLast() }
        guard trimmed != "/", let slash = trimmed.lastIndex(of: "/") else { return nil }
        let parent = slash == trimmed.startIndex ? "/" : String(trimmed[..<slash])
        return (parent, String(trimmed[trimmed.index(after: slash)...]))
    }

    private static func join(_ directory: String, _ name: String) -> String {
        directory == "/" ? "/" + name : directory + "/" + name
    }
}
