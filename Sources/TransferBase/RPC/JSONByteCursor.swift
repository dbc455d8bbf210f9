/// Not this reader's to decide: the tree path reads the text.
struct NotOnTheFastPath: Error {}

/// A position in JSON text, reading values off it strictly but only as far as it is sure of:
/// anything else (an escape in a string, a number the tree reads as another type, nesting deeper
/// than ``maximumDepth``) throws ``NotOnTheFastPath``, and the caller reads the text through
/// ``JSONParser``. ``JobObjectReader``'s cursor.
struct JSONByteCursor {
    /// The deepest nesting of a skipped value (``JSONParser/maximumDepth`` is far more, from the
    /// whole text's start).
    static let maximumDepth = 32

    let bytes: UnsafeRawBufferPointer
    var index = 0

    init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    // MARK: - Tokens

    mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    /// Whether only whitespace is left.
    mutating func atEnd() -> Bool {
        skipWhitespace()
        return index == bytes.count
    }

    mutating func expect(_ byte: UInt8) throws {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == byte else { throw NotOnTheFastPath() }
        index += 1
    }

    /// Consumes `byte` if it comes next.
    mutating func take(_ byte: UInt8) -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == byte else { return false }
        index += 1
        return true
    }

    /// Consumes `null` if it comes next.
    mutating func takeNull() throws -> Bool {
        skipWhitespace()
        guard index < bytes.count, bytes[index] == UInt8(ascii: "n") else { return false }
        try literal("null")
        return true
    }

    mutating func literal(_ word: StaticString) throws {
        let n = word.utf8CodeUnitCount
        guard index + n <= bytes.count else { throw NotOnTheFastPath() }
        for k in 0..<n where bytes[index + k] != word.utf8Start[k] { throw NotOnTheFastPath() }
        index += n
    }

    /// The members of an object: `body` gets each name and must consume its value.
    mutating func members(_ body: (inout JSONByteCursor, Key) throws -> Void) throws {
        try expect(UInt8(ascii: "{"))
        if take(UInt8(ascii: "}")) { return }
        repeat {
            let name = try key()
            try expect(UInt8(ascii: ":"))
            try body(&self, name)
        } while take(UInt8(ascii: ","))
        try expect(UInt8(ascii: "}"))
    }

    /// A member name of up to 16 ASCII bytes packed into two words (byte `k` at bits `8k` of
    /// `low`, then of `high`), compared without making a `String` (a `switch` over strings compares
    /// them one by one); a longer name is ``Key/other``.
    struct Key: Equatable {
        var low: UInt64
        var high: UInt64

        /// Any name no member read here has.
        static let other = Key(low: 0, high: 0)
    }

    mutating func key() throws -> Key {
        try expect(UInt8(ascii: "\""))
        var low: UInt64 = 0
        var high: UInt64 = 0
        var k = 0
        while index < bytes.count {
            let byte = bytes[index]
            index += 1
            if byte == UInt8(ascii: "\"") { return k <= 16 ? Key(low: low, high: high) : .other }
            // An escaped or non-ASCII name is no name read here: the tree path's.
            guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\\") else { throw NotOnTheFastPath() }
            if k < 8 {
                low |= UInt64(byte) << (8 * k)
            } else if k < 16 {
                high |= UInt64(byte) << (8 * (k - 8))
            }
            k += 1
        }
        throw NotOnTheFastPath()
    }

    /// A string without escapes or control characters, valid UTF-8.
    mutating func string() throws -> String {
        try expect(UInt8(ascii: "\""))
        let start = index
        var ascii = true
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "\"") {
                let text = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
                index += 1
                // ASCII needs no validation (and `String(validating:)` is slow, not specialized).
                if ascii { return String(decoding: text, as: UTF8.self) }
                guard let s = String(validating: text, as: UTF8.self) else { throw NotOnTheFastPath() }
                return s
            }
            guard byte != UInt8(ascii: "\\"), byte >= 0x20 else { throw NotOnTheFastPath() }
            if byte >= 0x80 { ascii = false }
            index += 1
        }
        throw NotOnTheFastPath()
    }

    mutating func optionalString() throws -> String? { try takeNull() ? nil : string() }

    /// A plain integer: digits with an optional minus, no fraction or exponent (the tree path
    /// reads `1.0` or `1e3`).
    mutating func integer() throws -> Int64 {
        skipWhitespace()
        let negative = take(UInt8(ascii: "-"))
        let start = index
        var value: Int64 = 0
        while index < bytes.count, case let d = bytes[index], d >= UInt8(ascii: "0"), d <= UInt8(ascii: "9") {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (s, o2) = m.addingReportingOverflow(Int64(d - UInt8(ascii: "0")))
            guard !o1, !o2 else { throw NotOnTheFastPath() }
            value = s
            index += 1
        }
        let count = index - start
        guard count > 0, count == 1 || bytes[start] != UInt8(ascii: "0") else { throw NotOnTheFastPath() }
        if index < bytes.count,
            bytes[index] == UInt8(ascii: ".") || bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E")
        {
            throw NotOnTheFastPath()
        }
        return negative ? -value : value
    }

    mutating func optionalInteger() throws -> Int64? { try takeNull() ? nil : integer() }

    mutating func int() throws -> Int {
        guard let v = Int(exactly: try integer()) else { throw NotOnTheFastPath() }
        return v
    }

    mutating func optionalInt() throws -> Int? { try takeNull() ? nil : int() }

    /// A number as a `Double`, as the tree path gives it (RFC 8259's grammar; finite).
    mutating func double() throws -> Double {
        skipWhitespace()
        let start = index
        func digits() -> Int {
            let from = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                index += 1
            }
            return index - from
        }
        _ = take(UInt8(ascii: "-"))
        let intStart = index
        let intDigits = digits()
        guard intDigits > 0, intDigits == 1 || bytes[intStart] != UInt8(ascii: "0") else { throw NotOnTheFastPath() }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            guard digits() > 0 else { throw NotOnTheFastPath() }
        }
        if index < bytes.count, bytes[index] == UInt8(ascii: "e") || bytes[index] == UInt8(ascii: "E") {
            index += 1
            if index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") {
                index += 1
            }
            guard digits() > 0 else { throw NotOnTheFastPath() }
        }
        // A short number is a small string: no allocation.
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        guard let value = Double(text), value.isFinite else { throw NotOnTheFastPath() }
        // The tree reads `-0` (and `-0.0`, `-1e-400`) as the integer 0: +0.0, as here.
        return value == 0 ? 0 : value
    }

    mutating func optionalDouble() throws -> Double? { try takeNull() ? nil : double() }

    mutating func bool() throws -> Bool {
        skipWhitespace()
        guard index < bytes.count else { throw NotOnTheFastPath() }
        if bytes[index] == UInt8(ascii: "t") {
            try literal("true")
            return true
        }
        try literal("false")
        return false
    }

    mutating func raw<E: RawRepresentable>(_ type: E.Type) throws -> E where E.RawValue == String {
        guard let value = E(rawValue: try string()) else { throw NotOnTheFastPath() }
        return value
    }

    mutating func optionalRaw<E: RawRepresentable>(_ type: E.Type) throws -> E? where E.RawValue == String {
        try takeNull() ? nil : raw(type)
    }

    /// Skips a value whose text is read strictly afterwards (an object or array: only its end is
    /// found here, strings and escapes taken into account) or now (anything else).
    mutating func skipValue() throws {
        skipWhitespace()
        guard index < bytes.count else { throw NotOnTheFastPath() }
        switch bytes[index] {
        case UInt8(ascii: "\""):
            _ = try string()
        case UInt8(ascii: "t"), UInt8(ascii: "f"):
            _ = try bool()
        case UInt8(ascii: "n"):
            try literal("null")
        case UInt8(ascii: "{"), UInt8(ascii: "["):
            // Past a small depth the tree decides (its limit counts from the line's start, not
            // from this value's).
            var depth = 0
            while index < bytes.count {
                switch bytes[index] {
                case UInt8(ascii: "\""):
                    index += 1
                    while index < bytes.count, bytes[index] != UInt8(ascii: "\"") {
                        index += bytes[index] == UInt8(ascii: "\\") ? 2 : 1
                    }
                    guard index < bytes.count else { throw NotOnTheFastPath() }
                case UInt8(ascii: "{"), UInt8(ascii: "["):
                    depth += 1
                    guard depth <= Self.maximumDepth else { throw NotOnTheFastPath() }
                case UInt8(ascii: "}"), UInt8(ascii: "]"):
                    depth -= 1
                    if depth == 0 {
                        index += 1
                        return
                    }
                default:
                    break
                }
                index += 1
            }
            throw NotOnTheFastPath()
        default:
            _ = try double()
        }
    }

    /// A nested object (`error`, `hook`, `response`) or null, read by the tree path from its text.
    mutating func nested<T: JSONValueInitializable>(_ type: T.Type) throws -> T? {
        if try takeNull() { return nil }
        skipWhitespace()
        let start = index
        try skipValue()
        let text = UnsafeRawBufferPointer(rebasing: bytes[start..<index])
        return try T(jsonValue: try JSONParser.parse(text), codingPath: [])
    }

}
