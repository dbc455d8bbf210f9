import CUV
import Foundation

/// The daemon's one libuv loop. Loop-thread only.
public final class EventLoop {
    /// The underlying libuv loop, for handles created elsewhere in this layer.
    public let raw: UnsafeMutablePointer<uv_loop_t>

    /// Creates and initializes a new loop.
    public init() throws {
        raw = UnsafeMutablePointer<uv_loop_t>.allocate(capacity: 1)
        let rc = uv_loop_init(raw)
        if rc != 0 {
            raw.deallocate()
            throw UVError(rc, "uv_loop_init")
        }
    }

    /// Runs until no active handles remain or ``stop()`` is called.
    public func run() { uv_run(raw, UV_RUN_DEFAULT) }

    /// Asks the loop to return from ``run()`` at the next iteration.
    public func stop() { uv_stop(raw) }

    /// The loop's cached clock, in milliseconds.
    public var nowMillis: UInt64 { uv_now(raw) }
}

/// A libuv error turned into a Swift error in one place.
public struct UVError: Error, CustomStringConvertible {
    /// The negative errno libuv returned.
    public let code: Int32
    /// What was being done.
    public let operation: String

    /// Creates an error from a libuv return code.
    public init(_ code: Int32, _ operation: String) {
        self.code = code
        self.operation = operation
    }

    /// The operation and libuv's message for the code.
    public var description: String {
        "\(operation): \(String(cString: uv_strerror(code)))"
    }

    /// Throws when `rc` is negative.
    public static func check(_ rc: Int32, _ operation: String) throws {
        if rc < 0 { throw UVError(rc, operation) }
    }
}

/// Casts any libuv handle pointer to `uv_handle_t*`.
@inline(__always)
func asHandle<T>(_ p: UnsafeMutablePointer<T>) -> UnsafeMutablePointer<uv_handle_t> {
    UnsafeMutableRawPointer(p).assumingMemoryBound(to: uv_handle_t.self)
}

/// Closes a heap-allocated handle and frees its memory in the close callback (the one place
/// where handle memory allocated by this layer is released).
func closeAndFree<T>(_ p: UnsafeMutablePointer<T>) {
    let h = asHandle(p)
    h.pointee.data = nil
    if uv_is_closing(h) != 0 { return }
    uv_close(h) { handle in
        if let handle { UnsafeMutableRawPointer(handle).deallocate() }
    }
}
