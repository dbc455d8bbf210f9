import Foundation

/// Parses a transfer rate such as `--limit-rate 500K` into bytes per second (SPEC "The CLI":
/// "RATE accepts `500K`, `2M` (bytes per second, powers of 1024)").
///
/// Accepted, case-insensitively, with surrounding whitespace ignored:
/// - a plain number of bytes: `1024`, optionally followed by `B` (`1024B`);
/// - a number followed by a unit `K`, `M`, `G` or `T` (powers of 1024), optionally followed by
///   `B` or `iB`: `500K`, `500k`, `2MB`, `2MiB`, `1G`;
/// - a decimal number with a unit: `1.5M` is 1 572 864. Fractions of a byte are cut off.
///
/// Refused (`nil`): empty strings, signs, exponents, `inf`/`nan`, inner whitespace (`500 K`),
/// unknown units, results of zero (`0`, `0K`, `0.0001K`), values that overflow `Int64`, and a
/// decimal number of bytes (`1.5`, `1.5B`): a fraction without a unit is most likely a unit
/// forgotten, and taken as bytes it set a limit of 1 byte a second.
public enum RateParser {
    /// The multiplier of each unit letter (lowercase): powers of 1024.
    public static let unitMultipliers: [Character: Int64] = [
        "k": 1 << 10,
        "m": 1 << 20,
        "g": 1 << 30,
        "t": 1 << 40,
    ]

    /// Parses `s` into a positive number of bytes per second.
    ///
    /// - Parameter s: The rate as the user wrote it, e.g. `"500K"`, `"2M"`, `"1.5M"` or `"1024"`.
    /// - Returns: Bytes per second (at least 1), or `nil` if `s` is not a positive rate.
    public static func parse(_ s: String) -> Int64? {
        var text = Substring(s.trimmingCharacters(in: .whitespaces).lowercased())
        guard !text.isEmpty else { return nil }

        // Unit suffix: "b", "<u>", "<u>b" or "<u>ib".
        var multiplier: Int64 = 1
        if text.hasSuffix("ib") {
            text = text.dropLast(2)
            guard let unit = text.last, let m = unitMultipliers[unit] else { return nil }
            multiplier = m
            text = text.dropLast()
        } else {
            if text.hasSuffix("b") { text = text.dropLast() }
            if let unit = text.last, let m = unitMultipliers[unit] {
                multiplier = m
                text = text.dropLast()
            }
        }

        let parts = text.split(separator: ".", maxSplits: 1, omittingEmptySubsequences: false)
        guard let integerPart = parts.first, isDigits(integerPart) else { return nil }

        if parts.count == 1 {
            guard let whole = Int64(integerPart) else { return nil }
            let (value, overflow) = whole.multipliedReportingOverflow(by: multiplier)
            guard !overflow, value > 0 else { return nil }
            return value
        }

        let fraction = parts[1]
        guard multiplier > 1, isDigits(fraction), let number = Double(text) else { return nil }
        let value = (number * Double(multiplier)).rounded(.down)
        // Double(Int64.max) rounds up to 2^63, so compare with `<`.
        guard value >= 1, value < Double(Int64.max) else { return nil }
        return Int64(value)
    }

    /// Whether `s` is one or more ASCII digits.
    private static func isDigits(_ s: Substring) -> Bool {
        !s.isEmpty && s.utf8.allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }
}
