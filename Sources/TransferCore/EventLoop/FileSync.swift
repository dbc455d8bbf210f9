import CUV
import Foundation

/// Runs `fdatasync` on libuv's thread pool and reports back on the loop thread.
/// Loop-thread only.
public enum FileSync {
    private final class Box {
        let completion: (Int32) -> Void
        init(_ completion: @escaping (Int32) -> Void) { self.completion = completion }
    }

    /// Starts an `fdatasync(fd)` off the loop; `completion` gets 0 or a negative errno.
    /// The request and its box are released in the request callback (the one place).
    public static func fdatasync(loop: EventLoop, fd: Int32, completion: @escaping (Int32) -> Void) {
        let req = UnsafeMutablePointer<uv_fs_t>.allocate(capacity: 1)
        let rc = uv_fs_fdatasync(loop.raw, req, fd) { req in
            guard let req else { return }
            let result = Int32(truncatingIfNeeded: req.pointee.result)
            let box = req.pointee.data.map { Unmanaged<Box>.fromOpaque($0).takeRetainedValue() }
            uv_fs_req_cleanup(req)
            req.deallocate()
            box?.completion(result < 0 ? result : 0)
        }
        if rc < 0 {
            req.deallocate()
            completion(rc)
            return
        }
        // Set after the uv_fs_* call, which initializes the request.
        req.pointee.data = Unmanaged.passRetained(Box(completion)).toOpaque()
    }
}
