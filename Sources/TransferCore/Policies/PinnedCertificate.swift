import CCurl
import Foundation

/// Certificate pinning (`--pin-cert FILE`): the server's chain must contain that certificate.
/// Checked when the response headers arrive, before any body byte is kept.
public enum PinnedCertificate {
    /// The base64 body of every PEM certificate in `text`, whitespace removed.
    public static func pemBodies(_ text: String) -> [String] {
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

    /// Whether the chain of the connection behind `easy` contains a certificate of `pemFile`.
    static func chainContains(easy: CurlEasy?, pemFile: String) -> Bool {
        guard let easy, let text = try? String(contentsOfFile: pemFile, encoding: .utf8) else { return false }
        let pins = Set(pemBodies(text))
        guard !pins.isEmpty else { return false }
        let n = aft_certinfo_count(easy.handle)
        for i in 0..<n {
            guard let p = aft_certinfo_pem(easy.handle, Int32(i)) else { continue }
            if pemBodies(String(cString: p)).contains(where: pins.contains) { return true }
        }
        return false
    }
}
