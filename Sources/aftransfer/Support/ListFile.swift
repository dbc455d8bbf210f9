import Foundation
import TransferBase

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
        for (index, raw) in Self.lines(of: text).enumerated() {
            let line = Self.trimmed(raw)
            if line.isEmpty || line.hasPrefix("#") { continue }
            var url = line
            var file: String?
            if let tab = line.unicodeScalars.firstIndex(of: "\t") {
                url = Self.trimmed(line.unicodeScalars[..<tab])
                let name = Self.trimmed(line.unicodeScalars[line.unicodeScalars.index(after: tab)...])
                file = name.isEmpty ? nil : name
            }
            entries.append(Entry(line: index + 1, url: url, file: file))
        }
        self.entries = entries
    }

    /// The text's lines, split where `Character.isNewline` would (LF, CR, CRLF as one, VT, FF, NEL,
    /// U+2028, U+2029), but scalar by scalar: a list of 100,000 lines is parsed in a blink.
    static func lines(of text: String) -> [Substring.UnicodeScalarView] {
        let scalars = text.unicodeScalars
        var lines: [Substring.UnicodeScalarView] = []
        var start = scalars.startIndex
        var index = start
        while index < scalars.endIndex {
            let scalar = scalars[index]
            guard isNewline(scalar) else {
                index = scalars.index(after: index)
                continue
            }
            lines.append(scalars[start..<index])
            index = scalars.index(after: index)
            if scalar == "\r", index < scalars.endIndex, scalars[index] == "\n" { index = scalars.index(after: index) }
            start = index
        }
        lines.append(scalars[start...])
        return lines
    }

    private static func isNewline(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A...0x0D, 0x85, 0x2028, 0x2029: return true
        default: return false
        }
    }

    /// `text` without the spaces (tab and Unicode spaces, as `CharacterSet.whitespaces`) and `\r`
    /// around it.
    private static func trimmed(_ text: Substring.UnicodeScalarView) -> String {
        func isBlank(_ scalar: Unicode.Scalar) -> Bool {
            scalar == "\t" || scalar == "\r" || scalar.properties.generalCategory == .spaceSeparator
        }
        guard let first = text.firstIndex(where: { !isBlank($0) }),
            let last = text.lastIndex(where: { !isBlank($0) })
        else { return "" }
        return String(text[first...last])
    }

    /// Reads a list from a file, or from stdin for `-`.
    /// - Throws: ``CLIFailure`` (exit 2) when it cannot be read or is not UTF-8.
    static func read(_ path: String) throws -> ListFile {
        let data: Data
        if path == "-" {
            data = FileHandle.standardInput.readDataToEndOfFile()
        } else {
            // Opened here so that a refusal gives the system's reason (no such file, permission
            // denied, a directory), which Foundation's reading errors do not.
            let fd = open(Paths.absolute(path), O_RDONLY | O_CLOEXEC)
            func refuse(_ code: Int32) -> CLIFailure {
                CLIFailure.usage("cannot read the list \(path): \(String(cString: strerror(code)))")
            }
            guard fd >= 0 else { throw refuse(errno) }
            let file = FileHandle(fileDescriptor: fd, closeOnDealloc: true)
            var info = stat()
            if fstat(fd, &info) == 0 && (info.st_mode & S_IFMT) == S_IFDIR { throw refuse(EISDIR) }
            do {
                data = try file.readToEnd() ?? Data()
            } catch {
                let e = error as NSError
                throw e.domain == NSPOSIXErrorDomain ? refuse(Int32(e.code)) : refuse(EIO)
            }
        }
        guard let text = String(data: data, encoding: .utf8) else {
            let origin = path == "-" ? "stdin" : path
            throw CLIFailure.usage("\(origin) line \(firstLineNotUTF8(data)): not UTF-8 text")
        }
        return ListFile(text: text)
    }

    /// The number (from 1) of the first line of `data` that is not UTF-8.
    static func firstLineNotUTF8(_ data: Data) -> Int {
        var line = 1
        for piece in data.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false) {
            if String(validating: piece, as: UTF8.self) == nil { return line }
            line += 1
        }
        return line  // not reached for data that is not UTF-8: a newline never splits a character
    }

    /// The target files named by the list (`URL<TAB>FILE`, relative to `directory`), or nil for
    /// the entries whose name the server suggests.
    static func target(of entry: Entry, in directory: String) -> String? {
        guard let file = entry.file else { return nil }
        if file.hasPrefix("/") { return Paths.absoluteFile(file) }
        return Paths.absoluteFile(directory + "/" + file)
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
