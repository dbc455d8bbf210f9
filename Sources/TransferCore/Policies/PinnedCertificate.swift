import CCurl
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
        let n = aft_certinfo_count(easy.handle)
        for i in 0..<n {
            guard let p = aft_certinfo_pem(easy.handle, Int32(i)) else { continue }
            if pemBodies(String(cString: p)).contains(where: pins.contains) { return true }
        }
        return false
    }

    /// The error of a hop whose chain lacks the pinned certificate.
    static var mismatch: TransferError {
        TransferError(.tls, "the server's chain does not contain the pinned certificate", retryable: false)
    }

    /// libcurl's prerequest callback: `clientp` is the unretained ``TransferTask``. Returns
    /// CURL_PREREQFUNC_ABORT (1) when the pin fails; the hop then ends with the task's
    /// `abortError` (`tls`).
    private static let prereq: aft_curl_prereq_cb = { clientp, _, _, _, _ in
            guard let clientp else { return 1 }
            let task = Unmanaged<TransferTask>.fromOpaque(clientp).takeUnretainedValue()
            guard let pin = task.record.request.pinCert else { return 0 }
            if chainContains(easy: task.easy, pemFile: pin) { return 0 }
            task.abortError = mismatch
            return 1
        }

    /// Makes `easy` check the pin of `task` (an unretained ``TransferTask``) on a fresh connection,
    /// before its request is sent.
    static func enforce(on easy: CurlEasy, task: UnsafeMutableRawPointer) {
        easy.set(CURLOPT_CERTINFO, 1)
        easy.set(CURLOPT_FRESH_CONNECT, 1)
        easy.set(CURLOPT_PREREQDATA, pointer: task)
        easy.setPrereq(prereq)
    }
}
