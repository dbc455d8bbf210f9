import CUV

/// A `uv_prepare_t`: runs a callback once per loop iteration, after that iteration's callbacks
/// and before the loop waits for I/O — the end of a "pass of the loop" (the engine's group
/// commit). Unreferenced: it never keeps the loop alive. Loop-thread only; the owner keeps it
/// alive and calls ``close()``.
public final class LoopPrepare {
    private let handle: UnsafeMutablePointer<uv_prepare_t>
    private let body: () -> Void
    private var closed = false

    /// Starts calling `body` at the end of every loop pass.
    public init(loop: EventLoop, _ body: @escaping () -> Void) {
        self.body = body
        handle = UnsafeMutablePointer<uv_prepare_t>.allocate(capacity: 1)
        uv_prepare_init(loop.raw, handle)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv_prepare_start(handle) { h in
            guard let h, let data = h.pointee.data else { return }
            Unmanaged<LoopPrepare>.fromOpaque(data).takeUnretainedValue().body()
        }
        uv_unref(asHandle(handle))
    }

    /// Stops and frees the handle (in its close callback).
    public func close() {
        guard !closed else { return }
        closed = true
        uv_prepare_stop(handle)
        closeAndFree(handle)
    }

    deinit { close() }
}
