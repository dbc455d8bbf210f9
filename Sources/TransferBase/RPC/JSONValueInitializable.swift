/// A type that reads itself straight from a ``JSONValue`` tree, member by member, without
/// `Decodable`'s keyed containers: ``JSONValueDecoder`` takes this path for it wherever it meets it
/// (alone, in an array, as a member).
///
/// Written for the job object: following 2,000 jobs, the CLI spent a quarter of its CPU decoding
/// the daemon's events through `Decodable` (a generic container, a coding path and a type check
/// per member), more than parsing their text (docs/benchmarks.md, seventh session). A conforming
/// type keeps its `Decodable` conformance and must decode every value exactly as it would
/// (``JSONMembers`` follows ``JSONValueDecoder``'s rules and throws the same `DecodingError`s).
public protocol JSONValueInitializable: Decodable {
    /// Reads the value from `value`, found at `codingPath` (for errors).
    /// - Throws: `DecodingError`, as `init(from:)` would.
    init(jsonValue value: JSONValue, codingPath: [CodingKey]) throws
}

/// An object's members, read by name with ``JSONValueDecoder``'s rules: a required member absent is
/// `keyNotFound`; an optional one absent or `null` is nil; a value of the wrong type is
/// `typeMismatch`; an integer out of range or an unknown enum value is `dataCorrupted`.
public struct JSONMembers {
    private let members: [String: JSONValue]
    private let codingPath: [CodingKey]

    /// The members of `value`, which must be an object.
    /// - Throws: `typeMismatch` when it is not.
    public init(_ value: JSONValue, codingPath: [CodingKey]) throws {
        guard case .object(let members) = value else {
            throw JSONValueDecoder.mismatch([String: JSONValue].self, value, codingPath)
        }
        self.members = members
        self.codingPath = codingPath
    }

    private func path(_ key: String) -> [CodingKey] { codingPath + [JSONKey(stringValue: key)] }

    private func required(_ key: String) throws -> JSONValue {
        guard let value = members[key] else {
            throw DecodingError.keyNotFound(
                JSONKey(stringValue: key),
                DecodingError.Context(codingPath: codingPath, debugDescription: "no value for \(key)"))
        }
        return value
    }

    private func present(_ key: String) -> JSONValue? {
        guard let value = members[key], value != .null else { return nil }
        return value
    }

    // MARK: - Leaves

    private func string(_ value: JSONValue, _ key: String) throws -> String {
        guard case .string(let s) = value else { throw JSONValueDecoder.mismatch(String.self, value, path(key)) }
        return s
    }

    private func bool(_ value: JSONValue, _ key: String) throws -> Bool {
        guard case .bool(let b) = value else { throw JSONValueDecoder.mismatch(Bool.self, value, path(key)) }
        return b
    }

    private func double(_ value: JSONValue, _ key: String) throws -> Double {
        switch value {
        case .int(let i): return Double(i)
        case .double(let d): return d
        default: throw JSONValueDecoder.mismatch(Double.self, value, path(key))
        }
    }

    private func integer<I: FixedWidthInteger>(_ value: JSONValue, _ key: String, as type: I.Type) throws -> I {
        guard case .int(let i) = value else { throw JSONValueDecoder.mismatch(type, value, path(key)) }
        guard let exact = I(exactly: i) else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(codingPath: path(key), debugDescription: "\(i) does not fit in \(type)"))
        }
        return exact
    }

    private func raw<E: RawRepresentable>(_ value: JSONValue, _ key: String, as type: E.Type) throws -> E
    where E.RawValue == String {
        let text = try string(value, key)
        guard let result = E(rawValue: text) else {
            throw DecodingError.dataCorrupted(
                DecodingError.Context(
                    codingPath: path(key),
                    debugDescription: "Cannot initialize \(type) from invalid String value \(text)"))
        }
        return result
    }

    // MARK: - Required members

    /// The string member `key`.
    public func string(_ key: String) throws -> String { try string(required(key), key) }
    /// The boolean member `key`.
    public func bool(_ key: String) throws -> Bool { try bool(required(key), key) }
    /// The number member `key` (an integer or not).
    public func double(_ key: String) throws -> Double { try double(required(key), key) }
    /// The integer member `key`, which must fit in `I`.
    public func integer<I: FixedWidthInteger>(_ key: String, as type: I.Type = I.self) throws -> I {
        try integer(required(key), key, as: type)
    }
    /// The member `key` as an enum of strings.
    public func raw<E: RawRepresentable>(_ key: String, as type: E.Type = E.self) throws -> E
    where E.RawValue == String { try raw(required(key), key, as: type) }
    /// The member `key` as a type that reads itself.
    public func value<T: JSONValueInitializable>(_ key: String, as type: T.Type = T.self) throws -> T {
        try T(jsonValue: required(key), codingPath: path(key))
    }
    /// The array member `key` of a type that reads itself.
    public func array<T: JSONValueInitializable>(_ key: String, of type: T.Type = T.self) throws -> [T] {
        let value = try required(key)
        guard case .array(let elements) = value else {
            throw JSONValueDecoder.mismatch([JSONValue].self, value, path(key))
        }
        let base = path(key)
        var result: [T] = []
        result.reserveCapacity(elements.count)
        for (i, element) in elements.enumerated() {
            result.append(try T(jsonValue: element, codingPath: base + [JSONKey(intValue: i)]))
        }
        return result
    }
    /// The object member `key` whose values are all strings.
    public func strings(_ key: String) throws -> [String: String] {
        let value = try required(key)
        guard case .object(let members) = value else {
            throw JSONValueDecoder.mismatch([String: JSONValue].self, value, path(key))
        }
        var result: [String: String] = [:]
        result.reserveCapacity(members.count)
        for (name, member) in members {
            guard case .string(let s) = member else {
                throw JSONValueDecoder.mismatch(String.self, member, path(key) + [JSONKey(stringValue: name)])
            }
            result[name] = s
        }
        return result
    }

    // MARK: - Optional members

    /// The string member `key`, or nil when absent or null.
    public func string(ifPresent key: String) throws -> String? { try present(key).map { try string($0, key) } }
    /// The number member `key`, or nil when absent or null.
    public func double(ifPresent key: String) throws -> Double? { try present(key).map { try double($0, key) } }
    /// The integer member `key`, or nil when absent or null.
    public func integer<I: FixedWidthInteger>(ifPresent key: String, as type: I.Type = I.self) throws -> I? {
        try present(key).map { try integer($0, key, as: type) }
    }
    /// The member `key` as an enum of strings, or nil when absent or null.
    public func raw<E: RawRepresentable>(ifPresent key: String, as type: E.Type = E.self) throws -> E?
    where E.RawValue == String { try present(key).map { try raw($0, key, as: type) } }
    /// The boolean member `key`, or nil when absent or null.
    public func bool(ifPresent key: String) throws -> Bool? { try present(key).map { try bool($0, key) } }
    /// The array member `key` of strings, or nil when absent or null.
    public func strings(ifPresent key: String) throws -> [String]? {
        guard let value = present(key) else { return nil }
        guard case .array(let elements) = value else {
            throw JSONValueDecoder.mismatch([JSONValue].self, value, path(key))
        }
        var result: [String] = []
        result.reserveCapacity(elements.count)
        for (i, element) in elements.enumerated() {
            guard case .string(let s) = element else {
                throw JSONValueDecoder.mismatch(String.self, element, path(key) + [JSONKey(intValue: i)])
            }
            result.append(s)
        }
        return result
    }
    /// The member `key` as a type that reads itself, or nil when absent or null.
    public func value<T: JSONValueInitializable>(ifPresent key: String, as type: T.Type = T.self) throws -> T? {
        try present(key).map { try T(jsonValue: $0, codingPath: path(key)) }
    }
}
