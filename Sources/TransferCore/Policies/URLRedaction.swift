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
        guard let schemeEnd = url.range(of: "://") else { return url }
        let afterScheme = url[schemeEnd.upperBound...]
        let authorityEnd = afterScheme.firstIndex(where: { $0 == "/" || $0 == "?" || $0 == "#" }) ?? url.endIndex
        let authority = url[schemeEnd.upperBound..<authorityEnd]
        guard let at = authority.lastIndex(of: "@") else { return url }
        return String(url[..<schemeEnd.upperBound]) + String(url[url.index(after: at)...])
    }
}
