import Foundation
import TransferCore

/// The `-i LIST` file of `download`: one URL a line, `URL<TAB>FILE` to name the file; blank lines
/// and lines starting with `#` are skipped; a `\r` before the newline is ignored.
struct ListFile {
    /// One URL of the list.
    struct Entry: Equatable {
        /// The 1-based line number.
        var line: Int
        var url: String
        /// The file named after a tab, as written, or nil.
        var file: String?
    }

    /// The entries, in order.
    var entries: [Entry]

    /// Parses the list's text.
    init(text: String) {
        var entries: [Entry] = []
        // Split on Characters: "\r\n" is one Character, so a CRLF file counts its lines right.
        for (index, raw) in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespaces.union(CharacterSet(charactersIn: "\r")))
            if line.isEmpty || line.hasPrefix("#") { continue }
            var url = line
            var file: String?
            if let tab = line.firstIndex(of: "\t") {
                url = line[..<tab].trimmingCharacters(in: .whitespaces)
                let name = line[line.index(after: tab)...].trimmingCharacters(in: .whitespaces)
                file = name.isEmpty ? nil : name
            }
            entries.append(Entry(line: index + 1, url: url, file: file))
        }
        self.entries = entries
    }

    /// Reads a list from a file, or from stdin for `-`.
    /// - Throws: ``CLIFailure`` (exit 2) when it cannot be read or is not UTF-8.
    static func read(_ path: String) throws -> ListFile {
        let data: Data
        if path == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            guard let contents = FileManager.default.contents(atPath: Paths.absolute(path)) else {
                throw CLIFailure.usage("cannot read the list \(path)")
            }
            data = contents
        }
        guard let text = String(data: data, encoding: .utf8) else {
            throw CLIFailure.usage("the list \(path) is not UTF-8 text")
        }
        return ListFile(text: text)
    }

    /// The target files named by the list (`URL<TAB>FILE`, relative to `directory`), or nil for
    /// the entries whose name the server suggests.
    static func target(of entry: Entry, in directory: String) -> String? {
        guard let file = entry.file else { return nil }
        if file.hasPrefix("/") { return Paths.absolute(file) }
        return Paths.absolute(directory + "/" + file)
    }

    /// The first two entries that would write the same file: the same named target, or the same
    /// URL twice without a name (the server would suggest the same name for both).
    /// - Returns: the later entry and the line of the earlier one, or nil when there is none.
    static func firstClash(in entries: [Entry], directory: String) -> (entry: Entry, earlierLine: Int, reason: String)?
    {
        var targets: [String: Int] = [:]
        var unnamed: [String: Int] = [:]
        for entry in entries {
            if let target = target(of: entry, in: directory) {
                if let earlier = targets[target] {
                    return (entry, earlier, "writes \(target), as line \(earlier) does")
                }
                targets[target] = entry.line
            } else {
                if let earlier = unnamed[entry.url] {
                    return (
                        entry, earlier,
                        "the same URL as line \(earlier) would download to the same file; name one with URL<TAB>FILE"
                    )
                }
                unnamed[entry.url] = entry.line
            }
        }
        return nil
    }
}
