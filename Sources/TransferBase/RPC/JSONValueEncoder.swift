/// Encodes an `Encodable` value straight into a ``JSONValue`` tree, without writing JSON text and
/// parsing it back (what `JSONValue(encoding:)` did: for a 100,000-line `download -i` that was a
/// third of the CLI's CPU).
///
/// The tree is what `JSONEncoder` would write with its default strategies for the types the RPC
/// uses: integers as ``JSONValue/int(_:)``, floating point as ``JSONValue/double(_:)`` (an
/// integral one as an integer, as it would read back), `nil` from `encodeNil` as `null`, and keys
/// skipped by `encodeIfPresent` absent.
public struct JSONValueEncoder {
    /// An encoder.
    public init() {}

    /// Encodes `value`.
    /// - Throws: `EncodingError` for a value JSON cannot hold (a non-finite number), or what the
    ///   value's own `encode(to:)` throws.
    public func encode<T: Encodable>(_ value: T) throws -> JSONValue {
        try Node.encode(value, codingPath: [])
    }
}

/// One value being built: a leaf, or an object or array whose members are still being written
/// (containers write into it after it was handed out, so it is a reference).
private final class Node {
    var leaf: JSONValue?
    var members: [String: Node]?
    var elements: [Node]?

    init() {}
    init(_ leaf: JSONValue) { self.leaf = leaf }

    var value: JSONValue {
        if let members { return .object(members.mapValues(\.value)) }
        if let elements { return .array(elements.map(\.value)) }
        return leaf ?? .object([:])
    }

    /// The fast paths for the leaves; anything else encodes itself into a fresh node.
    static func encode<T: Encodable>(_ value: T, codingPath: [CodingKey]) throws -> JSONValue {
        switch value {
        case let v as String: return .string(v)
        case let v as Bool: return .bool(v)
        case let v as Int: return .int(Int64(v))
        case let v as Int64: return .int(v)
        case let v as Double: return try double(v, codingPath)
        case let v as JSONValue: return v
        default:
            let node = Node()
            try value.encode(to: TreeEncoder(node: node, codingPath: codingPath))
            return node.value
        }
    }

    static func double(_ v: Double, _ codingPath: [CodingKey]) throws -> JSONValue {
        guard v.isFinite else {
            throw EncodingError.invalidValue(
                v, EncodingError.Context(codingPath: codingPath, debugDescription: "\(v) is not a JSON number"))
        }
        if v.rounded() == v, let i = Int64(exactly: v) { return .int(i) }
        return .double(v)
    }
}

private struct TreeEncoder: Encoder {
    let node: Node
    let codingPath: [CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        if node.members == nil { node.members = [:] }
        return KeyedEncodingContainer(KeyedContainer<Key>(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> UnkeyedEncodingContainer {
        if node.elements == nil { node.elements = [] }
        return UnkeyedContainer(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> SingleValueEncodingContainer { SingleContainer(node: node, codingPath: codingPath) }
}

private struct SingleContainer: SingleValueEncodingContainer {
    let node: Node
    let codingPath: [CodingKey]

    mutating func encodeNil() throws { node.leaf = .null }
    mutating func encode(_ value: Bool) throws { node.leaf = .bool(value) }
    mutating func encode(_ value: String) throws { node.leaf = .string(value) }
    mutating func encode(_ value: Double) throws { node.leaf = try Node.double(value, codingPath) }
    mutating func encode(_ value: Float) throws { node.leaf = try Node.double(Double(value), codingPath) }
    mutating func encode(_ value: Int) throws { node.leaf = .int(Int64(value)) }
    mutating func encode(_ value: Int8) throws { node.leaf = .int(Int64(value)) }
    mutating func encode(_ value: Int16) throws { node.leaf = .int(Int64(value)) }
    mutating func encode(_ value: Int32) throws { node.leaf = .int(Int64(value)) }
    mutating func encode(_ value: Int64) throws { node.leaf = .int(value) }
    mutating func encode(_ value: UInt) throws { node.leaf = try Self.unsigned(value, codingPath) }
    mutating func encode(_ value: UInt8) throws { node.leaf = .int(Int64(value)) }
    mutating func encode(_ value: UInt16) throws { node.leaf = .int(Int64(value)) }
    mutating func encode(_ value: UInt32) throws { node.leaf = .int(Int64(value)) }
    mutating func encode(_ value: UInt64) throws { node.leaf = try Self.unsigned(value, codingPath) }
    mutating func encode<T: Encodable>(_ value: T) throws { node.leaf = try Node.encode(value, codingPath: codingPath) }

    /// An unsigned integer past `Int64.max` is written as `JSONEncoder` would read it back: a double.
    static func unsigned<U: UnsignedInteger>(_ value: U, _ codingPath: [CodingKey]) throws -> JSONValue {
        if let i = Int64(exactly: value) { return .int(i) }
        return .double(Double(value))
    }
}

private struct KeyedContainer<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: Node
    let codingPath: [CodingKey]

    private func put(_ value: JSONValue, _ key: Key) { node.members?[key.stringValue] = Node(value) }

    mutating func encodeNil(forKey key: Key) throws { put(.null, key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { put(.bool(value), key) }
    mutating func encode(_ value: String, forKey key: Key) throws { put(.string(value), key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { put(.int(Int64(value)), key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { put(.int(value), key) }
    mutating func encode(_ value: Double, forKey key: Key) throws {
        put(try Node.double(value, codingPath + [key]), key)
    }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
        put(try Node.encode(value, codingPath: codingPath + [key]), key)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type, forKey key: Key
    ) -> KeyedEncodingContainer<NestedKey> {
        let child = Node()
        node.members?[key.stringValue] = child
        return TreeEncoder(node: child, codingPath: codingPath + [key]).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> UnkeyedEncodingContainer {
        let child = Node()
        node.members?[key.stringValue] = child
        return TreeEncoder(node: child, codingPath: codingPath + [key]).unkeyedContainer()
    }

    mutating func superEncoder() -> Encoder { superEncoder(forKey: "super") }

    mutating func superEncoder(forKey key: Key) -> Encoder {
        let child = Node()
        node.members?[key.stringValue] = child
        return TreeEncoder(node: child, codingPath: codingPath + [key])
    }

    private mutating func superEncoder(forKey name: String) -> Encoder {
        let child = Node()
        node.members?[name] = child
        return TreeEncoder(node: child, codingPath: codingPath + [JSONKey(stringValue: name)])
    }
}

private struct UnkeyedContainer: UnkeyedEncodingContainer {
    let node: Node
    let codingPath: [CodingKey]
    var count: Int { node.elements?.count ?? 0 }

    private var nextPath: [CodingKey] { codingPath + [JSONKey(intValue: count)] }

    mutating func encodeNil() throws { node.elements?.append(Node(.null)) }
    mutating func encode<T: Encodable>(_ value: T) throws {
        // Encoded before the append: the path reads the elements' count.
        let element = Node(try Node.encode(value, codingPath: nextPath))
        node.elements?.append(element)
    }

    mutating func nestedContainer<NestedKey: CodingKey>(
        keyedBy keyType: NestedKey.Type
    ) -> KeyedEncodingContainer<NestedKey> {
        let child = Node()
        let path = nextPath
        node.elements?.append(child)
        return TreeEncoder(node: child, codingPath: path).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> UnkeyedEncodingContainer {
        let child = Node()
        let path = nextPath
        node.elements?.append(child)
        return TreeEncoder(node: child, codingPath: path).unkeyedContainer()
    }

    mutating func superEncoder() -> Encoder {
        let child = Node()
        let path = nextPath
        node.elements?.append(child)
        return TreeEncoder(node: child, codingPath: path)
    }
}
