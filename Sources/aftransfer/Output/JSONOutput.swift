import Foundation
import TransferBase

/// JSON for scripts: keys sorted, pretty-printed, slashes unescaped. Job objects are printed as the
/// daemon sent them, so that fields this CLI does not know pass through.
enum JSONOutput {
    /// Encodes `value` for printing.
    static func string<T: Encodable>(_ value: T) throws -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .prettyPrinted, .withoutEscapingSlashes]
        let data = try encoder.encode(value)
        return String(decoding: data, as: UTF8.self)
    }

    /// Prints `value` on stdout.
    static func print<T: Encodable>(_ value: T) throws {
        Console.out(try string(value))
    }
}
