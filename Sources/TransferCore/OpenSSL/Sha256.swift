import COpenSSL
import Foundation

/// Incremental SHA-256: the one type that speaks to OpenSSL (EVP). Loop-thread only.
public final class Sha256 {
    fileprivate let ctx: OpaquePointer?

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

    /// Adds bytes `start..<end` of the open file `fd`, synchronously.
    /// Returns false on a read error or a short file.
    public func update(fd: Int32, from start: Int64 = 0, to end: Int64) -> Bool {
        aft_sha256_update_fd(ctx, fd, start, end) == 0
    }

    /// Adds bytes `start..<end` of `fd` on libuv's thread pool and calls `completion` on the loop
    /// thread. The digest must not be touched until then (the closure keeps it alive).
    public func update(
        loop: EventLoop, fd: Int32, from start: Int64, to end: Int64, completion: @escaping (Bool) -> Void
    ) {
        WorkPool.run(loop, { aft_sha256_update_fd(self.ctx, fd, start, end) }) { rc in completion(rc == 0) }
    }

    /// The hex SHA-256 of `bytes`.
    public static func hex(of bytes: [UInt8]) -> String {
        let d = Sha256()
        bytes.withUnsafeBytes { if let base = $0.baseAddress { d.update(base, bytes.count) } }
        return d.finalizeHex()
    }

    /// The hex digest (the context is finished; create a new one for more).
    public func finalizeHex() -> String {
        var md = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        EVP_DigestFinal_ex(ctx, &md, &len)
        // By hand: String(format:) per byte was 4% of the daemon's CPU with thousands of files.
        let digits = Array("0123456789abcdef".utf8)
        var out: [UInt8] = []
        out.reserveCapacity(Int(len) * 2)
        for byte in md.prefix(Int(len)) {
            out.append(digits[Int(byte >> 4)])
            out.append(digits[Int(byte & 0x0f)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
