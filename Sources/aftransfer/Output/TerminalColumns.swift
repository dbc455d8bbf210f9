/// How many terminal columns text takes, and text fitted to a number of columns: a CJK character
/// or an emoji takes two, a combining mark none. Lines drawn in place (`watch`, `--wait` bars)
/// must never be wider than the terminal: a line that wraps shifts every later redraw by one, and
/// the screen fills with stale copies.
///
/// Written here rather than with the C library's `wcwidth`, which needs a UTF-8 locale set in the
/// process and still says nothing of a character made of several scalars (an emoji sequence).
enum TerminalColumns {
    /// The columns `text` takes.
    static func width(_ text: String) -> Int {
        text.reduce(0) { $0 + width(of: $1) }
    }

    /// The columns one character (a grapheme cluster) takes: 0, 1 or 2.
    static func width(of character: Character) -> Int {
        if character.isASCII { return character.asciiValue.map { $0 >= 0x20 && $0 != 0x7F ? 1 : 0 } ?? 1 }
        guard let first = character.unicodeScalars.first else { return 0 }
        if isZeroWidth(first) { return 0 }
        // An emoji shown as one (a presentation selector, or a scalar that is one by default).
        if character.unicodeScalars.contains(where: { $0.value == 0xFE0F }) { return 2 }
        if first.properties.isEmojiPresentation { return 2 }
        return isWide(first.value) ? 2 : 1
    }

    /// `text` cut to `columns` columns, ending in `…` when it was longer.
    static func clip(_ text: String, to columns: Int) -> String {
        guard columns > 0 else { return "" }
        guard width(text) > columns else { return text }
        var kept = ""
        var used = 0
        for character in text {
            let w = width(of: character)
            if used + w > columns - 1 { break }
            kept.append(character)
            used += w
        }
        return kept + "…"
    }

    /// `text` with spaces after it up to `columns` columns (as it is when wider).
    static func pad(_ text: String, to columns: Int) -> String {
        let w = width(text)
        return w < columns ? text + String(repeating: " ", count: columns - w) : text
    }

    /// `text` with spaces before it up to `columns` columns (as it is when wider).
    static func leftPad(_ text: String, to columns: Int) -> String {
        let w = width(text)
        return w < columns ? String(repeating: " ", count: columns - w) + text : text
    }

    /// Combining marks, format characters and the like: drawn over the character before.
    private static func isZeroWidth(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .nonspacingMark, .enclosingMark, .format, .control: return true
        default: return scalar.value == 0x200B
        }
    }

    /// East Asian Wide and Fullwidth ranges (Unicode's EastAsianWidth.txt, W and F), in the
    /// blocks where names meet them.
    private static func isWide(_ v: UInt32) -> Bool {
        switch v {
        case 0x1100...0x115F, 0x231A...0x231B, 0x2329...0x232A, 0x23E9...0x23EC, 0x23F0, 0x23F3,
            0x25FD...0x25FE, 0x2614...0x2615, 0x2648...0x2653, 0x267F, 0x2693, 0x26A1, 0x26AA...0x26AB,
            0x26BD...0x26BE, 0x26C4...0x26C5, 0x26CE, 0x26D4, 0x26EA, 0x26F2...0x26F3, 0x26F5, 0x26FA,
            0x26FD, 0x2705, 0x270A...0x270B, 0x2728, 0x274C, 0x274E, 0x2753...0x2755, 0x2757,
            0x2795...0x2797, 0x27B0, 0x27BF, 0x2B1B...0x2B1C, 0x2B50, 0x2B55,
            0x2E80...0x303E, 0x3041...0x33FF, 0x3400...0x4DBF, 0x4E00...0x9FFF, 0xA000...0xA4CF,
            0xA960...0xA97F, 0xAC00...0xD7A3, 0xF900...0xFAFF, 0xFE10...0xFE19, 0xFE30...0xFE6F,
            0xFF00...0xFF60, 0xFFE0...0xFFE6, 0x16FE0...0x16FE4, 0x17000...0x18CFF, 0x1B000...0x1B2FF,
            0x1F004, 0x1F0CF, 0x1F18E, 0x1F191...0x1F19A, 0x1F200...0x1F251, 0x1F300...0x1F64F,
            0x1F680...0x1F6FF, 0x1F7E0...0x1F7EB, 0x1F90C...0x1F9FF, 0x1FA70...0x1FAFF,
            0x20000...0x2FFFD, 0x30000...0x3FFFD:
            return true
        default:
            return false
        }
    }
}
