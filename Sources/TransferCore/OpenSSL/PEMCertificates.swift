import COpenSSL

/// Certificates in PEM text as OpenSSL reads them (`--cacert`, `--pin-cert`): a file that only
/// looks like one (its markers around a body that is not a certificate) is refused when the job
/// is queued, rather than failing every attempt with `tls`.
enum PEMCertificates {
    /// How many certificates OpenSSL reads from `data`; nil when a certificate block is damaged.
    static func count(in data: [UInt8]) -> Int? {
        let n = data.withUnsafeBytes { aft_pem_certificate_count($0.baseAddress, Int32(clamping: $0.count)) }
        return n < 0 ? nil : Int(n)
    }
}
