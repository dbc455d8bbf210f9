/// Parses JSON text (RFC 8259) into a ``JSONValue`` in one pass over its bytes.
///
/// Written here rather than taken from Foundation: `JSONDecoder` can only reach an untyped value
/// through `Codable`, trying each case in turn and throwing on every miss, which was a third of
/// the daemon's CPU when 100,000 requests arrived (docs/benchmarks.md). It makes the values
/// `JSONDecoder` makes of numbers: an integer that fits in 64 bits (or
/// a number with a fraction or exponent whose value is such an integer, as `1.0`) is ``JSONValue/int(_:)``,
/// any other finite number ``JSONValue/double(_:)``; a number too large for a `Double`, invalid
/// UTF-8, a raw control character in a string or nesting deeper than ``maximumDepth`` is refused,
/// as there. It is stricter than Foundation where RFC 8259 is: a trailing comma and a member name
/// given twice (which Foundation lets through) are refused too.
public struct JSONParser {
    /// The deepest nesting of arrays and objects accepted (as Foundation's `JSONDecoder`).
    public static let maximumDepth = 512

    /// Why a text is not JSON, and where.
    public struct Failure: Error, Equatable, CustomStringConvertible {
        /// What was wrong.
        public var reason: String
        /// The byte offset where it was found.
        public var offset: Int
        /// `reason at byte N`.
        public var description: String { "\(reason) at byte \(offset)" }
    }

    private let bytes: UnsafeRawBufferPointer
    private var index = 0
    private var depth = 0

    private init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

    /// Parses one JSON value that fills `text` (whitespace around it allowed).
    /// - Throws: ``Failure``.
    public static func parse<C: Collection>(_ text: C) throws -> JSONValue where C.Element == UInt8 {
        if let value = try text.withContiguousStorageIfAvailable({ try parse(UnsafeRawBufferPointer($0)) }) {
            return value
        }
        return try Array(text).withUnsafeBytes { try parse($0) }
    }

    /// Parses one JSON value that fills `buffer` (whitespace around it allowed).
    /// - Throws: ``Failure``.
    public static func parse(_ buffer: UnsafeRawBufferPointer) throws -> JSONValue {
        var parser = JSONParser(buffer)
        parser.skipWhitespace()
        let value = try parser.value()
        parser.skipWhitespace()
        guard parser.index == buffer.count else { throw parser.failure("text after the value") }
        return value
    }

    // MARK: - Values

    private mutating func value() throws -> JSONValue {
        guard index < bytes.count else { throw failure("unexpected end") }
        switch bytes[index] {
        case UInt8(ascii: "{"): return try object()
        case UInt8(ascii: "["): return try array()
        case UInt8(ascii: "\""): return .string(try string())
        case UInt8(ascii: "t"): return try literal("true", .bool(true))
        case UInt8(ascii: "f"): return try literal("false", .bool(false))
        case UInt8(ascii: "n"): return try literal("null", .null)
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return try number()
        default: throw failure("unexpected character")
        }
    }

    private mutating func object() throws -> JSONValue {
        try enter()
        index += 1
        var members: [String: JSONValue] = [:]
        skipWhitespace()
        if peek(UInt8(ascii: "}")) {
            index += 1
            depth -= 1
            return .object(members)
        }
        while true {
            skipWhitespace()
            guard peek(UInt8(ascii: "\"")) else { throw failure("expected a member name") }
            let key = try string()
            skipWhitespace()
            guard peek(UInt8(ascii: ":")) else { throw failure("expected ':'") }
            index += 1
            skipWhitespace()
            guard members.updateValue(try value(), forKey: key) == nil else {
                throw failure("a member name given twice")
            }
            skipWhitespace()
            if peek(UInt8(ascii: ",")) {
                index += 1
            } else if peek(UInt8(ascii: "}")) {
                index += 1
                depth -= 1
                return .object(members)
            } else {
                throw failure("expected ',' or '}'")
            }
        }
    }

    private mutating func array() throws -> JSONValue {
        try enter()
        index += 1
        var elements: [JSONValue] = []
        skipWhitespace()
        if peek(UInt8(ascii: "]")) {
            index += 1
            depth -= 1
            return .array(elements)
        }
        while true {
            skipWhitespace()
            elements.append(try value())
            skipWhitespace()
            if peek(UInt8(ascii: ",")) {
                index += 1
            } else if peek(UInt8(ascii: "]")) {
                index += 1
                depth -= 1
                return .array(elements)
            } else {
                throw failure("expected ',' or ']'")
            }
        }
    }

    private mutating func enter() throws {
        depth += 1
        guard depth <= Self.maximumDepth else { throw failure("nested deeper than \(Self.maximumDepth)") }
    }

    private mutating func literal(_ word: StaticString, _ value: JSONValue) throws -> JSONValue {
        let start = index
        let matches = word.withUTF8Buffer { text in
            start + text.count <= bytes.count && (0..<text.count).allSatisfy { bytes[start + $0] == text[$0] }
        }
        guard matches else { throw failure("unexpected character") }
        index += word.utf8CodeUnitCount
        return value
    }

    // MARK: - Strings

    private mutating func string() throws -> String {
        index += 1  // the opening quote
        let start = index
        // The common case: no escapes, so the bytes between the quotes are the string's UTF-8;
        // when they are all ASCII there is nothing to validate (most of an RPC's strings).
        var ascii = true
        while index < bytes.count {
            let b = bytes[index]
            if b == UInt8(ascii: "\"") {
                let range = start..<index
                let text =
                    ascii
                    ? String(decoding: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self) : try utf8(range)
                index += 1
                return text
            }
            if b == UInt8(ascii: "\\") { break }
            if b < 0x20 { throw failure("a control character in a string") }
            if b >= 0x80 { ascii = false }
            index += 1
        }
        var scalars = Array(UnsafeRawBufferPointer(rebasing: bytes[start..<index]))
        while index < bytes.count {
            let b = bytes[index]
            switch b {
            case UInt8(ascii: "\""):
                index += 1
                guard let text = String(validating: scalars, as: UTF8.self) else {
                    throw failure("invalid UTF-8 in a string")
                }
                return text
            case UInt8(ascii: "\\"):
                index += 1
                try escape(into: &scalars)
            case 0..<0x20:
                throw failure("a control character in a string")
            default:
                scalars.append(b)
                index += 1
            }
        }
        throw failure("an unterminated string")
    }

    private func utf8(_ range: Range<Int>) throws -> String {
        guard let text = String(validating: UnsafeRawBufferPointer(rebasing: bytes[range]), as: UTF8.self) else {
            throw failure("invalid UTF-8 in a string")
        }
        return text
    }

    private mutating func escape(into out: inout [UInt8]) throws {
        guard index < bytes.count else { throw failure("an unterminated string") }
        let b = bytes[index]
        index += 1
        switch b {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): out.append(b)
        case UInt8(ascii: "b"): out.append(0x08)
        case UInt8(ascii: "f"): out.append(0x0C)
        case UInt8(ascii: "n"): out.append(0x0A)
        case UInt8(ascii: "r"): out.append(0x0D)
        case UInt8(ascii: "t"): out.append(0x09)
        case UInt8(ascii: "u"):
            var scalar = try hex4()
            if (0xD800..<0xDC00).contains(scalar) {
                // A high surrogate must be followed by an escaped low one.
                guard index + 1 < bytes.count, bytes[index] == UInt8(ascii: "\\"), bytes[index + 1] == UInt8(ascii: "u")
                else { throw failure("a lone surrogate in a string") }
                index += 2
                let low = try hex4()
                guard (0xDC00..<0xE000).contains(low) else { throw failure("a lone surrogate in a string") }
                scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
            } else if (0xDC00..<0xE000).contains(scalar) {
                throw failure("a lone surrogate in a string")
            }
            guard let unicode = Unicode.Scalar(scalar) else { throw failure("an invalid escape") }
            UTF8.encode(unicode) { out.append($0) }
        default:
            throw failure("an invalid escape")
        }
    }

    private mutating func hex4() throws -> UInt32 {
        guard index + 4 <= bytes.count else { throw failure("an unterminated string") }
        var value: UInt32 = 0
        for _ in 0..<4 {
            let b = bytes[index]
            let digit: UInt8
            switch b {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = b - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = b - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = b - UInt8(ascii: "A") + 10
            default: throw failure("an invalid \\u escape")
            }
            value = value << 4 | UInt32(digit)
            index += 1
        }
        return value
    }

    // MARK: - Numbers

    private mutating func number() throws -> JSONValue {
        let start = index
        if peek(UInt8(ascii: "-")) { index += 1 }
        guard index < bytes.count, isDigit(bytes[index]) else { throw failure("a malformed number") }
        if bytes[index] == UInt8(ascii: "0") {
            index += 1
            if index < bytes.count, isDigit(bytes[index]) { throw failure("a number with a leading zero") }
        } else {
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        var integral = true
        if peek(UInt8(ascii: ".")) {
            integral = false
            index += 1
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("a malformed number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if peek(UInt8(ascii: "e")) || peek(UInt8(ascii: "E")) {
            integral = false
            index += 1
            if peek(UInt8(ascii: "+")) || peek(UInt8(ascii: "-")) { index += 1 }
            guard index < bytes.count, isDigit(bytes[index]) else { throw failure("a malformed number") }
            while index < bytes.count, isDigit(bytes[index]) { index += 1 }
        }
        if integral, let int = integer(start..<index) { return .int(int) }
        let text = String(decoding: UnsafeRawBufferPointer(rebasing: bytes[start..<index]), as: UTF8.self)
        if integral, let int = Int64(text) { return .int(int) }
        if let int = Self.integerWithZeroFraction(text) { return .int(int) }
        guard let double = Double(text), double.isFinite else {
            throw failure("a number out of range")
        }
        if double.rounded() == double, let int = Int64(exactly: double) { return .int(int) }
        return .double(double)
    }

    /// The integer written in `range` (an optional minus, then digits) when it has at most 18
    /// digits, so that it cannot overflow; nil otherwise (the text path decides).
    private func integer(_ range: Range<Int>) -> Int64? {
        var i = range.lowerBound
        let negative = bytes[i] == UInt8(ascii: "-")
        if negative { i += 1 }
        guard range.upperBound - i <= 18 else { return nil }
        var value: Int64 = 0
        while i < range.upperBound {
            value = value * 10 + Int64(bytes[i] - UInt8(ascii: "0"))
            i += 1
        }
        return negative ? -value : value
    }

    /// `123.000` as an exact integer (a `Double` would round one past 2^53).
    private static func integerWithZeroFraction(_ text: String) -> Int64? {
        guard let dot = text.firstIndex(of: "."), !text.contains(where: { $0 == "e" || $0 == "E" }),
            text[text.index(after: dot)...].allSatisfy({ $0 == "0" })
        else { return nil }
        return Int64(text[..<dot])
    }

    private func isDigit(_ b: UInt8) -> Bool { b >= UInt8(ascii: "0") && b <= UInt8(ascii: "9") }

    // MARK: - Bytes

    private func peek(_ b: UInt8) -> Bool { index < bytes.count && bytes[index] == b }

    private mutating func skipWhitespace() {
        while index < bytes.count {
            switch bytes[index] {
            case 0x20, 0x09, 0x0A, 0x0D: index += 1
            default: return
            }
        }
    }

    private func failure(_ reason: String) -> Failure { Failure(reason: reason, offset: index) }
}
