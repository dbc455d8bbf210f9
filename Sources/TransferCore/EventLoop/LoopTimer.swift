import CUV

/// A `uv_timer_t` with a Swift callback. Loop-thread only.
///
/// The owner keeps the timer alive; `handle.data` holds an unretained reference that
/// ``close()`` (or `deinit`) clears before the handle is closed and freed.
public final class LoopTimer {
    private let handle: UnsafeMutablePointer<uv_timer_t>
    private var callback: (() -> Void)?
    private var closed = false

    /// Creates a stopped timer on `loop`.
    public init(loop: EventLoop) {
        handle = UnsafeMutablePointer<uv_timer_t>.allocate(capacity: 1)
        uv_timer_init(loop.raw, handle)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    }

    /// Starts (or restarts) the timer.
    /// - Parameters:
    ///   - after: milliseconds until the first call.
    ///   - repeating: interval in milliseconds after that; 0 for once.
    ///   - body: what to run on the loop thread.
    public func start(after: UInt64, repeating: UInt64 = 0, _ body: @escaping () -> Void) {
        guard !closed else { return }
        callback = body
        uv_timer_start(
            handle,
            { h in
                guard let h, let data = h.pointee.data else { return }
                let timer = Unmanaged<LoopTimer>.fromOpaque(data).takeUnretainedValue()
                timer.callback?()
            }, after, repeating)
    }

    /// Stops the timer; it can be started again.
    public func stop() {
        guard !closed else { return }
        uv_timer_stop(handle)
    }

    /// Whether the timer will fire.
    public var isActive: Bool { !closed && uv_is_active(asHandle(handle)) != 0 }

    /// Does not keep the loop alive.
    public func unref() { if !closed { uv_unref(asHandle(handle)) } }

    /// Stops and closes the timer; its memory is freed in the close callback.
    public func close() {
        guard !closed else { return }
        closed = true
        callback = nil
        uv_timer_stop(handle)
        closeAndFree(handle)
    }

    deinit { close() }
}
