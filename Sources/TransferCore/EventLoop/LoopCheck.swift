import CUV

/// Runs a callback once, after the I/O callbacks of the loop pass in which it was armed (or of
/// the next pass, when armed outside them: in a timer, or at the end of a pass) — without the
/// loop waiting for I/O first. So work that many callbacks of one pass produce (libuv hands back
/// every finished pool item of a pass together; curl reports every transfer that ended) is
/// started once, together, without a timer's delay.
///
/// A `uv_check_t` runs the callback; while armed, a `uv_idle_t` with nothing to do keeps the
/// loop's wait for I/O from blocking (libuv polls without a timeout while an idle handle is
/// active; a check alone would wait for the next event, which may be the 250 ms tick). Both are
/// referenced only while armed, so the loop never ends with work owed and never stays for an
/// unarmed one. Loop-thread only; the owner keeps it alive and calls ``close()``.
public final class LoopCheck {
    private let check: UnsafeMutablePointer<uv_check_t>
    private let idle: UnsafeMutablePointer<uv_idle_t>
    private let body: () -> Void
    private var armed = false
    private var closed = false

    /// Creates an unarmed check on `loop` that runs `body` when it fires.
    public init(loop: EventLoop, _ body: @escaping () -> Void) {
        self.body = body
        check = UnsafeMutablePointer<uv_check_t>.allocate(capacity: 1)
        idle = UnsafeMutablePointer<uv_idle_t>.allocate(capacity: 1)
        uv_check_init(loop.raw, check)
        uv_idle_init(loop.raw, idle)
        check.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    /// Arms it: `body` runs once after this pass's I/O callbacks. Arming it again before then
    /// changes nothing.
    public func arm() {
        guard !armed, !closed else { return }
        armed = true
        uv_idle_start(idle) { _ in }
        uv_check_start(check) { h in
            guard let h, let data = h.pointee.data else { return }
            Unmanaged<LoopCheck>.fromOpaque(data).takeUnretainedValue().fire()
        }
    }

    private func fire() {
        uv_check_stop(check)
        uv_idle_stop(idle)
        armed = false
        body()
    }

    /// Stops and frees the handles (in their close callbacks); an armed body does not run.
    public func close() {
        guard !closed else { return }
        closed = true
        uv_check_stop(check)
        uv_idle_stop(idle)
        closeAndFree(check)
        closeAndFree(idle)
    }

    deinit { close() }
}
