import CUV

/// A `uv_check_t` that runs a callback once, after the I/O callbacks of the loop pass in which it
/// was armed (or of the next pass, when armed outside I/O callbacks) — before the loop waits
/// again. So work that many callbacks of one pass produce (libuv hands back every finished pool
/// item of a pass together; curl reports every transfer that ended) is started once, together,
/// without a timer's delay. Referenced while armed, so the loop does not end with work owed.
/// Loop-thread only; the owner keeps it alive and calls ``close()``.
public final class LoopCheck {
    private let handle: UnsafeMutablePointer<uv_check_t>
    private let body: () -> Void
    private var armed = false
    private var closed = false

    /// Creates an unarmed check on `loop` that runs `body` when it fires.
    public init(loop: EventLoop, _ body: @escaping () -> Void) {
        self.body = body
        handle = UnsafeMutablePointer<uv_check_t>.allocate(capacity: 1)
        uv_check_init(loop.raw, handle)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    /// Arms it: `body` runs once after this pass's I/O callbacks. Arming it again before then
    /// changes nothing.
    public func arm() {
        guard !armed, !closed else { return }
        armed = true
        uv_check_start(handle) { h in
            guard let h, let data = h.pointee.data else { return }
            let check = Unmanaged<LoopCheck>.fromOpaque(data).takeUnretainedValue()
            uv_check_stop(h)
            check.armed = false
            check.body()
        }
    }

    /// Stops and frees the handle (in its close callback); an armed body does not run.
    public func close() {
        guard !closed else { return }
        closed = true
        uv_check_stop(handle)
        closeAndFree(handle)
    }

    deinit { close() }
}
