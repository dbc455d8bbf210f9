import CUV

/// Blocking work on libuv's thread pool (fsync, rename, hashing reads), with the result handed
/// back on the loop thread. Loop-thread only (the work closure itself runs on a pool thread and
/// must touch nothing but what it captured).
public enum WorkPool {
    private final class Job {
        let work: () -> Int32
        let done: (Int32) -> Void
        /// Written on the pool thread, read in the after-callback on the loop thread.
        var result: Int32 = 0
        init(work: @escaping () -> Int32, done: @escaping (Int32) -> Void) {
            self.work = work
            self.done = done
        }
    }

    /// Runs `work` on the pool, then `done(result)` on the loop thread. If the pool refuses the
    /// request, runs both at once. The request and its box are released in the after-work
    /// callback (the one place).
    public static func run(
        _ loop: EventLoop, _ work: @escaping () -> Int32, done: @escaping (Int32) -> Void
    ) {
        let req = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
        let opaque = Unmanaged.passRetained(Job(work: work, done: done)).toOpaque()
        req.pointee.data = opaque
        let rc = uv_queue_work(
            loop.raw, req,
            { req in
                guard let req, let data = req.pointee.data else { return }
                let job = Unmanaged<Job>.fromOpaque(data).takeUnretainedValue()
                job.result = job.work()
            },
            { req, _ in
                guard let req else { return }
                let job = req.pointee.data.map { Unmanaged<Job>.fromOpaque($0).takeRetainedValue() }
                req.deallocate()
                if let job { job.done(job.result) }
            })
        if rc != 0 {
            Unmanaged<Job>.fromOpaque(opaque).release()
            req.deallocate()
            done(work())
        }
    }
}
