import COpenSSL
import CUV
import Foundation

/// Incremental SHA-256 (OpenSSL EVP). Loop-thread only.
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

    private final class Work {
        /// Retained so the context outlives the pool thread's use of it.
        let digest: Sha256
        let fd: Int32
        let start: Int64
        let end: Int64
        let completion: (Bool) -> Void
        /// Written on the pool thread, read in the after-callback on the loop thread.
        var ok = false
        init(digest: Sha256, fd: Int32, start: Int64, end: Int64, completion: @escaping (Bool) -> Void) {
            self.digest = digest
            self.fd = fd
            self.start = start
            self.end = end
            self.completion = completion
        }
    }

    /// Adds bytes `start..<end` of `fd` on libuv's thread pool and calls `completion` on the loop
    /// thread. The digest must not be touched until then. The request and its box are released in
    /// the after-work callback (the one place).
    public func update(loop: EventLoop, fd: Int32, from start: Int64, to end: Int64, completion: @escaping (Bool) -> Void) {
        let req = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
        let box = Work(digest: self, fd: fd, start: start, end: end, completion: completion)
        let opaque = Unmanaged.passRetained(box).toOpaque()
        req.pointee.data = opaque
        let rc = uv_queue_work(loop.raw, req, { req in
            guard let req, let data = req.pointee.data else { return }
            let w = Unmanaged<Work>.fromOpaque(data).takeUnretainedValue()
            w.ok = aft_sha256_update_fd(w.digest.ctx, w.fd, w.start, w.end) == 0
        }, { req, _ in
            guard let req else { return }
            let w = req.pointee.data.map { Unmanaged<Work>.fromOpaque($0).takeRetainedValue() }
            req.deallocate()
            w?.completion(w?.ok ?? false)
        })
        if rc != 0 {
            Unmanaged<Work>.fromOpaque(opaque).release()
            req.deallocate()
            completion(update(fd: fd, from: start, to: end))
        }
    }

    /// The hex digest (the context is finished; create a new one for more).
    public func finalizeHex() -> String {
        var md = [UInt8](repeating: 0, count: Int(EVP_MAX_MD_SIZE))
        var len: UInt32 = 0
        EVP_DigestFinal_ex(ctx, &md, &len)
        return md.prefix(Int(len)).map { String(format: "%02x", $0) }.joined()
    }
}
