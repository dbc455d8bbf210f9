import CUV

/// A `uv_signal_t` with a Swift callback; unreferenced so it never keeps the loop alive.
/// Loop-thread only.
public final class SignalWatcher {
    private let handle: UnsafeMutablePointer<uv_signal_t>
    private let callback: (Int32) -> Void
    private var closed = false

    /// Starts watching `signal` on `loop`.
    public init(loop: EventLoop, signal: Int32, _ body: @escaping (Int32) -> Void) {
        handle = UnsafeMutablePointer<uv_signal_t>.allocate(capacity: 1)
        callback = body
        uv_signal_init(loop.raw, handle)
        handle.pointee.data = Unmanaged.passUnretained(self).toOpaque()
        uv_signal_start(
            handle,
            { h, signum in
                guard let h, let data = h.pointee.data else { return }
                Unmanaged<SignalWatcher>.fromOpaque(data).takeUnretainedValue().callback(signum)
            }, signal)
        uv_unref(asHandle(handle))
    }

    /// Stops watching and frees the handle in its close callback.
    public func close() {
        guard !closed else { return }
        closed = true
        uv_signal_stop(handle)
        closeAndFree(handle)
    }

    deinit { close() }
}
