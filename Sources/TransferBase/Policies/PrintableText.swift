/// Text from outside made safe for people to read (README "Text for people never carries control
/// characters"): a control character is shown as `^X` (C0: `^[` for ESC, `^M` for CR; `^?` for
/// DEL) or U+FFFD (C1, and the bidirectional controls such as U+202E, which reorder what a
/// terminal shows: Unicode's `Bidi_Control`, listed here by code point so that the byte scan of
/// ``needsEscaping(_:keepingNewlines:)`` finds the same ones), never written as is. A server's
/// error message, a hook's output or a file name may carry escape sequences that would move the
/// cursor, retitle the terminal or rewrite a line of the daemon's log. The one rule for the
/// daemon's messages and log and the CLI's output.
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
            case 0x80...0x9F, 0x061C, 0x200E, 0x200F, 0x202A...0x202E, 0x2066...0x2069:
                out.append("\u{FFFD}")  // C1; the bidirectional controls (`Bidi_Control`)
            default:
                out.append(s)
            }
        }
        return String(out)
    }

    /// Whether `text` has a character ``of(_:keepingNewlines:)`` changes. On UTF-8 bytes: the
    /// daemon's log asks it of every line.
    package static func needsEscaping(_ text: String, keepingNewlines: Bool = false) -> Bool {
        var previous: UInt8 = 0
        var beforeThat: UInt8 = 0
        for b in text.utf8 {
            if b < 0x20 {
                if !(keepingNewlines && b == 0x0A) { return true }
            } else if b == 0x7F {
                return true
            } else if previous == 0xC2 && (0x80...0x9F).contains(b) {
                return true  // U+0080...U+009F, C1, is C2 80...C2 9F in UTF-8
            } else if previous == 0xD8 && b == 0x9C {
                return true  // U+061C ARABIC LETTER MARK
            } else if beforeThat == 0xE2 && previous == 0x80 && (b == 0x8E || b == 0x8F || (0xAA...0xAE).contains(b)) {
                return true  // U+200E, U+200F, U+202A...U+202E
            } else if beforeThat == 0xE2 && previous == 0x81 && (0xA6...0xA9).contains(b) {
                return true  // U+2066...U+2069
            }
            beforeThat = previous
            previous = b
        }
        return false
    }
}
