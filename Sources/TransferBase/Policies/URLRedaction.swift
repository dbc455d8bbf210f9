/// Removes credentials from URLs before they are shown (SPEC job object: `"url"`, "user:password
/// removed"; SPEC "Security": passwords are never printed).
public enum URLRedaction {
    /// The URL without its userinfo (`user:password@`, or `user@`).
    ///
    /// The authority is the text after `scheme://` up to the first `/`, `?` or `#` (RFC 3986
    /// §3.2); everything in it up to and including its last `@` is removed, so a password with an
    /// unencoded `@` goes too. The rest of the URL is kept byte for byte. A string without
    /// `://` is returned unchanged.
    ///
    /// - Parameter url: A URL as the user gave it.
    /// - Returns: The same URL without credentials, e.g. `https://host/x` for
    ///   `https://me:secret@host/x`.
    public static func redact(_ url: String) -> String {
        // On UTF-8 bytes (the delimiters are ASCII): Character-level searching was most of the
        // cost of listing 100,000 jobs.
        let bytes = Array(url.utf8)
        guard let schemeEnd = find(Array("://".utf8), in: bytes) else { return url }
        var authorityEnd = schemeEnd
        while authorityEnd < bytes.count,
            ![UInt8(ascii: "/"), UInt8(ascii: "?"), UInt8(ascii: "#")].contains(bytes[authorityEnd])
        {
            authorityEnd += 1
        }
        guard let at = bytes[schemeEnd..<authorityEnd].lastIndex(of: UInt8(ascii: "@")) else { return url }
        return String(decoding: bytes[..<schemeEnd] + bytes[(at + 1)...], as: UTF8.self)
    }

    /// The index just past the first occurrence of `needle` in `bytes`.
    private static func find(_ needle: [UInt8], in bytes: [UInt8]) -> Int? {
        guard bytes.count >= needle.count else { return nil }
        for i in 0...(bytes.count - needle.count) where bytes[i..<(i + needle.count)].elementsEqual(needle) {
            return i + needle.count
        }
        return nil
    }
}
