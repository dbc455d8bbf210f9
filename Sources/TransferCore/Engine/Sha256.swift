import COpenSSL
import Foundation

/// Incremental SHA-256 (OpenSSL EVP). Loop-thread only.
public final class Sha256 {
    private let ctx: OpaquePointer?

    /// Starts a new digest.
    public init() {
        ctx = EVP_MD_CTX_new()
        EVP_DigestInit_ex(ctx, EVP_sha256(), nil)
    }

    deinit { EVP_MD_CTX_free(ctx) }

    /// Adds bytes.
    public func update(_ p: UnsafeRawPointer, _ count: Int) {
        EVP_DigestUpdate(ctx, p, count)
    }

    /// Adds the first `length` bytes of the open file `fd` (read with pread, in 1 MiB chunks).
    /// Returns false on a read error or a short file.
    public func update(fd: Int32, length: Int64) -> Bool {
        let chunk = 1 << 20
        let buf = UnsafeMutableRawPointer.allocate(byteCount: chunk, alignment: 16)
        defer { buf.deallocate() }
        var off: Int64 = 0
        while off < length {
            let want = Int(min(Int64(chunk), length - off))
            let n = pread(fd, buf, want, off_t(off))
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { return false }
            update(buf, n)
            off += Int64(n)
        }
        return true
    }

    /// The hex digest (the context is finished; create a new one for more).
    public func finalizeHex() -> String {
        var md = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        EVP_DigestFinal_ex(ctx, &md, &len)
        return md.prefix(Int(len)).map { String(format: "%02x", $0) }.joined()
    }
}
