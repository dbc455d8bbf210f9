/// Decodes a `Decodable` type straight from a ``JSONValue`` tree, without writing it out as JSON
/// text and parsing it again (which was what `JSONValue.decode(as:)` did, at twice the cost of
/// the parse itself for a 100,000-request `transfer.addMany`).
///
/// It follows `JSONDecoder`'s rules for the values the RPC uses: integers from ``JSONValue/int(_:)``
/// (range-checked), floating point from either number case, `Bool` only from `true`/`false`,
/// `String` only from a string, `nil` from `null` or an absent key. Errors are the same
/// `DecodingError`s with the same coding paths (array elements are `Index N`).
public struct JSONValueDecoder {
    /// A decoder.
    public init() {}

    /// Decodes `type` from `value`.
    /// - Throws: `DecodingError` naming the coding path of the first value that does not fit.
    public func decode<T: Decodable>(_ type: T.Type, from value: JSONValue) throws -> T {
        try TreeDecoder(value: value, codingPath: []).decodeValue(T.self)
    }

    /// Decodes `type` from JSON text (``JSONParser``, then the tree): the store's JSON columns.
    /// - Throws: ``JSONParser/Failure`` or `DecodingError`.
    public func decode<T: Decodable>(_ type: T.Type, fromJSON text: String) throws -> T {
        var text = text
        return try decode(type, from: text.withUTF8 { try JSONParser.parse(UnsafeRawBufferPointer($0)) })
    }
}

/// A coding key for array elements and for `allKeys`.
struct JSONKey: CodingKey {
    var stringValue: String
    var intValue: Int?
    init(stringValue: String) { self.stringValue = stringValue }
    init(intValue: Int) {
        self.stringValue = "Index \(intValue)"
        self.intValue = intValue
    }
}

private struct TreeDecoder: Decoder {
    let value: JSONValue
    let codingPath: [CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) throws -> KeyedDecodingContainer<Key> {
        guard case .object(let members) = value else {
            throw mismatch([String: JSONValue].self, value, codingPath)
        }
        return KeyedDecodingContainer(KeyedContainer<Key>(members: members, codingPath: codingPath))
    }

    func unkeyedContainer() throws -> UnkeyedDecodingContainer {
        guard case .array(let elements) = value else { throw mismatch([JSONValue].self, value, codingPath) }
        return UnkeyedContainer(elements: elements, codingPath: codingPath)
    }

    func singleValueContainer() throws -> SingleValueDecodingContainer { self }

    /// The fast paths for the leaves; anything else decodes itself through this decoder.
    func decodeValue<T: Decodable>(_ type: T.Type) throws -> T {
        switch type {
        case is String.Type: if let v = try decode(String.self) as? T { return v }
        case is Bool.Type: if let v = try decode(Bool.self) as? T { return v }
        case is Int.Type: if let v = try decode(Int.self) as? T { return v }
        case is Int64.Type: if let v = try decode(Int64.self) as? T { return v }
        case is Double.Type: if let v = try decode(Double.self) as? T { return v }
        case is JSONValue.Type: if let v = value as? T { return v }
        case let direct as JSONValueInitializable.Type:
            if let v = try direct.init(jsonValue: value, codingPath: codingPath) as? T { return v }
        default: break
        }
        return try T(from: self)
    }
}

extension TreeDecoder: SingleValueDecodingContainer {
    func decodeNil() -> Bool { value == .null }

    func decode(_ type: Bool.Type) throws -> Bool {
        guard case .bool(let b) = value else { throw mismatch(type, value, codingPath) }
        return b
    }

    func decode(_ type: String.Type) throws -> String {
        guard case .string(let s) = value else { throw mismatch(type, value, codingPath) }
        return s
    }

    func decode(_ type: Double.Type) throws -> Double {
        switch value {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: throw mismatch(type, value, codingPath)
        }
    }

    func decode(_ type: Float.Type) throws -> Float { Float(try decode(Double.self)) }

    func decode<I: FixedWidthInteger & Decodable>(integer type: I.Type) throws -> I {
        guard case .int(let i) = value else { throw mismatch(type, value, codingPath) }
        guard let exact = I(exactly: i) else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(codingPath: codingPath, debugDescription: "\(i) does not fit in \(type)"))
        }
        return exact
    }

    func decode(_ type: Int.Type) throws -> Int { try decode(integer: type) }
    func decode(_ type: Int8.Type) throws -> Int8 { try decode(integer: type) }
    func decode(_ type: Int16.Type) throws -> Int16 { try decode(integer: type) }
    func decode(_ type: Int32.Type) throws -> Int32 { try decode(integer: type) }
    func decode(_ type: Int64.Type) throws -> Int64 { try decode(integer: type) }
    func decode(_ type: UInt.Type) throws -> UInt { try decode(integer: type) }
    func decode(_ type: UInt8.Type) throws -> UInt8 { try decode(integer: type) }
    func decode(_ type: UInt16.Type) throws -> UInt16 { try decode(integer: type) }
    func decode(_ type: UInt32.Type) throws -> UInt32 { try decode(integer: type) }
    func decode(_ type: UInt64.Type) throws -> UInt64 { try decode(integer: type) }

    func decode<T: Decodable>(_ type: T.Type) throws -> T { try decodeValue(type) }
}

private struct KeyedContainer<Key: CodingKey>: KeyedDecodingContainerProtocol {
    let members: [String: JSONValue]
    let codingPath: [CodingKey]

    var allKeys: [Key] { members.keys.compactMap { Key(stringValue: $0) } }

    func contains(_ key: Key) -> Bool { members[key.stringValue] != nil }

    private func member(_ key: Key) throws -> JSONValue {
        guard let value = members[key.stringValue] else {
            throw DecodingError.keyNotFound(
                key, DecodingError.Context(codingPath: codingPath, debugDescription: "no value for \(key.stringValue)"))
        }
        return value
    }

    private func decoder(_ key: Key) throws -> TreeDecoder {
        TreeDecoder(value: try member(key), codingPath: codingPath + [key])
    }

    func decodeNil(forKey key: Key) throws -> Bool { try member(key) == .null }

    // One dictionary lookup for an optional member, not three (`contains`, `decodeNil`, `decode`,
    // as the protocol's defaults do): most of a request's twenty members are optional.
    private func present(_ key: Key) -> TreeDecoder? {
        guard let value = members[key.stringValue], value != .null else { return nil }
        return TreeDecoder(value: value, codingPath: codingPath + [key])
    }

    func decodeIfPresent(_ type: String.Type, forKey key: Key) throws -> String? {
        try present(key)?.decode(type)
    }

    func decodeIfPresent(_ type: Bool.Type, forKey key: Key) throws -> Bool? { try present(key)?.decode(type) }
    func decodeIfPresent(_ type: Int.Type, forKey key: Key) throws -> Int? { try present(key)?.decode(type) }
    func decodeIfPresent(_ type: Int64.Type, forKey key: Key) throws -> Int64? { try present(key)?.decode(type) }
    func decodeIfPresent(_ type: Double.Type, forKey key: Key) throws -> Double? { try present(key)?.decode(type) }

    func decodeIfPresent<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T? {
        try present(key)?.decodeValue(type)
    }

    func decode<T: Decodable>(_ type: T.Type, forKey key: Key) throws -> T {
        try decoder(key).decodeValue(type)
    }

    func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type, forKey key: Key
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try decoder(key).container(keyedBy: type)
    }

    func nestedUnkeyedContainer(forKey key: Key) throws -> UnkeyedDecodingContainer {
        try decoder(key).unkeyedContainer()
    }

    func superDecoder() throws -> Decoder {
        TreeDecoder(value: .object(members), codingPath: codingPath)
    }

    func superDecoder(forKey key: Key) throws -> Decoder { try decoder(key) }
}

private struct UnkeyedContainer: UnkeyedDecodingContainer {
    let elements: [JSONValue]
    let codingPath: [CodingKey]
    var currentIndex = 0

    init(elements: [JSONValue], codingPath: [CodingKey]) {
        self.elements = elements
        self.codingPath = codingPath
    }

    var count: Int? { elements.count }
    var isAtEnd: Bool { currentIndex >= elements.count }

    private mutating func next<T>(_ type: T.Type) throws -> TreeDecoder {
        let path = codingPath + [JSONKey(intValue: currentIndex)]
        guard !isAtEnd else {
            throw DecodingError.valueNotFound(
                type, DecodingError.Context(codingPath: path, debugDescription: "the array has no more elements"))
        }
        defer { currentIndex += 1 }
        return TreeDecoder(value: elements[currentIndex], codingPath: path)
    }

    mutating func decodeNil() throws -> Bool {
        guard !isAtEnd, elements[currentIndex] == .null else { return false }
        currentIndex += 1
        return true
    }

    mutating func decode<T: Decodable>(_ type: T.Type) throws -> T {
        try next(type).decodeValue(type)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy type: NestedKey.Type
    ) throws -> KeyedDecodingContainer<NestedKey> {
        try next(type).container(keyedBy: type)
    }

    mutating func nestedUnkeyedContainer() throws -> UnkeyedDecodingContainer {
        try next([JSONValue].self).unkeyedContainer()
    }

    mutating func superDecoder() throws -> Decoder { try next(JSONValue.self) }
}

private func mismatch(_ type: Any.Type, _ value: JSONValue, _ path: [CodingKey]) -> DecodingError {
    JSONValueDecoder.mismatch(type, value, path)
}

extension JSONValueDecoder {
    /// `typeMismatch` at `path`: `value` is not a `type`.
    static func mismatch(_ type: Any.Type, _ value: JSONValue, _ path: [CodingKey]) -> DecodingError {
        let found: String
        switch value {
        case .null: found = "null"
        case .bool: found = "a boolean"
        case .int, .double: found = "a number"
        case .string: found = "a string"
        case .array: found = "an array"
        case .object: found = "an object"
        }
        return DecodingError.typeMismatch(
            type, DecodingError.Context(codingPath: path, debugDescription: "expected \(type), found \(found)"))
    }
}
