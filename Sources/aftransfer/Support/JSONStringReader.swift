/// The strings of JSON text read a byte at a time, escapes included: the part the CLI's
/// scanners of answers as they arrive (``JobIdScanner``, ``ResultElementScanner``) share. The
/// caller reads the structure outside strings and calls ``open()`` on a quote there.
struct JSONStringReader {
    /// Whether a string is open.
    private(set) var isOpen = false
    /// Whether the last byte taken was a backslash (the next one is escaped).
    private(set) var isEscaping = false

    /// Opens a string: the caller saw its quote outside one.
    mutating func open() {
        isOpen = true
        isEscaping = false
    }

    /// Takes `b` inside the open string: false when it is the closing quote (the string is closed
    /// then), true for the string's content (an escape's bytes included).
    mutating func take(_ b: UInt8) -> Bool {
        if isEscaping {
            isEscaping = false
        } else if b == UInt8(ascii: "\\") {
            isEscaping = true
        } else if b == UInt8(ascii: "\"") {
            isOpen = false
            return false
        }
        return true
    }
}
