extension JobJSONWriter {
    /// Any Encodable value as JSON bytes with sorted keys, slashes as they are
    /// (``JSONValueEncoder``, then ``value(_:)``): RPC results and the store's JSON columns.
    public static func json<T: Encodable>(_ value: T) throws -> [UInt8] {
        var writer = JobJSONWriter(capacity: 256)
        writer.value(try JSONValueEncoder().encode(value))
        return writer.bytes
    }

    /// Appends any JSON value as `JSONEncoder` with `.sortedKeys` writes it (objects' keys in
    /// sorted order, numbers and strings as ``int(_:)``, ``double(_:)`` and ``string(_:)`` do).
    public mutating func value(_ value: JSONValue) {
        switch value {
        case .null: null()
        case .bool(let b): bool(b)
        case .int(let i): int(i)
        case .double(let d): double(d)
        case .string(let s): string(s)
        case .array(let elements):
            bytes.append(UInt8(ascii: "["))
            for (i, element) in elements.enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                self.value(element)
            }
            bytes.append(UInt8(ascii: "]"))
        case .object(let members):
            bytes.append(UInt8(ascii: "{"))
            for (i, key) in members.keys.sorted().enumerated() {
                if i > 0 { bytes.append(UInt8(ascii: ",")) }
                string(key)
                bytes.append(UInt8(ascii: ":"))
                if let member = members[key] { self.value(member) }
            }
            bytes.append(UInt8(ascii: "}"))
        }
    }
}
