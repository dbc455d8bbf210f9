/// Text from outside made safe for people to read (README "Text for people never carries control
/// characters"): a control character is shown as `^X` (C0: `^[` for ESC, `^M` for CR; `^?` for
/// DEL) or U+FFFD (C1), never written as is. A server's error message, a hook's output or a file
/// name may carry escape sequences that would move the cursor, retitle the terminal or rewrite a
/// line of the daemon's log. The one rule for the daemon's messages and log and the CLI's output.
public enum PrintableText {
    /// `text` with its control characters shown; with `keepingNewlines`, a line feed stays one.
    public static func of(_ text: String, keepingNewlines: Bool = false) -> String {
        guard needsEscaping(text, keepingNewlines: keepingNewlines) else { return text }
        var out = String.UnicodeScalarView()
        for s in text.unicodeScalars {
            switch s.value {
            case 0x0A where keepingNewlines:
                out.append(s)
            case 0x00...0x1F:
                out.append("^")
                out.append(Unicode.Scalar(UInt8(s.value + 0x40)))
            case 0x7F:
                out.append(contentsOf: "^?".unicodeScalars)
            case 0x80...0x9F:
                out.append("\u{FFFD}")
            default:
                out.append(s)
            }
        }
        return String(out)
    }

    /// Whether `text` has a character ``of(_:keepingNewlines:)`` changes. On UTF-8 bytes: the
    /// daemon's log asks it of every line.
    static func needsEscaping(_ text: String, keepingNewlines: Bool = false) -> Bool {
        var afterC2 = false
        for b in text.utf8 {
            if b < 0x20 {
                if !(keepingNewlines && b == 0x0A) { return true }
            } else if b == 0x7F {
                return true
            } else if afterC2 && (0x80...0x9F).contains(b) {
                return true  // U+0080...U+009F, C1, is C2 80...C2 9F in UTF-8
            }
            afterC2 = b == 0xC2
        }
        return false
    }
}
