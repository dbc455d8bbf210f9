import Foundation

/// Certificate pinning (`--pin-cert FILE`): the server's chain must contain that certificate.
///
/// Checked on every hop once the connection is up and before the request is sent
/// (CURLOPT_PREREQFUNCTION), so neither the request nor its credentials ever reach a server that
/// fails the pin, and no body byte is written. The chain comes from CURLOPT_CERTINFO, which libcurl
/// fills only while it makes a TLS connection: a pinned hop therefore always opens a fresh one (a
/// cached connection, made by an unpinned job, would show no chain at all). A plain `http` hop has
/// no chain and fails the pin.
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
        return easy.certificateChainPEM.contains { pemBodies($0).contains(where: pins.contains) }
    }

    /// The error of a hop whose chain lacks the pinned certificate.
    static var mismatch: TransferError {
        TransferError(.tls, "the server's chain does not contain the pinned certificate", retryable: false)
    }
}
