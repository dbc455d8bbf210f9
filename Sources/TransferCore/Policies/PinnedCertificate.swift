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
    /// Whether the chain of the connection behind `easy` contains a certificate of `pemFile`.
    static func chainContains(easy: CurlEasy?, pemFile: String) -> Bool {
        guard let easy, let text = try? String(contentsOfFile: pemFile, encoding: .utf8) else { return false }
        let pins = Set(PEMText.certificateBodies(text))
        guard !pins.isEmpty else { return false }
        return easy.certificateChainPEM.contains { PEMText.certificateBodies($0).contains(where: pins.contains) }
    }

    /// The error of a hop whose chain lacks the pinned certificate.
    static var mismatch: TransferError {
        TransferError(.tls, "the server's chain does not contain the pinned certificate", retryable: false)
    }
}
