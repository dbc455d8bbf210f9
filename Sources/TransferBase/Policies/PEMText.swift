import Foundation

/// PEM text read without a TLS library: enough to tell whether a `--cacert` or `--pin-cert` file
/// holds certificates, and to compare a pinned certificate with a server's chain
/// (``RequestValidator``; `PinnedCertificate` in the daemon).
public enum PEMText {
    /// The base64 body of every PEM certificate in `text`, whitespace removed.
    public static func certificateBodies(_ text: String) -> [String] {
        var out: [String] = []
        var current: String?
        for line in text.split(whereSeparator: \.isNewline) {
            let l = line.trimmingCharacters(in: .whitespaces)
            if l.hasPrefix("-----BEGIN CERTIFICATE") {
                current = ""
            } else if l.hasPrefix("-----END CERTIFICATE") {
                if let c = current { out.append(c) }
                current = nil
            } else if let c = current {
                current = c + l
            }
        }
        return out
    }
}
