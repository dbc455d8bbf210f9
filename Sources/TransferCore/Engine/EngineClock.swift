import Foundation

/// The engine's two clocks: wall-clock time for what people read (the job object's timestamps,
/// `nextRetryAt`) and a monotonic clock for what must not jump with the wall clock (retry
/// deadlines). Setting the system clock back or forward neither fires nor stalls a retry timer.
/// Replaceable in tests.
public struct EngineClock: Sendable {
    /// Seconds since 1970 (wall clock).
    public var wall: @Sendable () -> Double
    /// Seconds of `CLOCK_MONOTONIC` (any origin; never jumps).
    public var monotonic: @Sendable () -> Double

    /// Creates a clock from two sources.
    public init(wall: @escaping @Sendable () -> Double, monotonic: @escaping @Sendable () -> Double) {
        self.wall = wall
        self.monotonic = monotonic
    }

    /// The system's clocks.
    public static let system = EngineClock(
        wall: { Timestamp.now() }, monotonic: { BatchAssembler.monotonicSeconds() })

    /// The monotonic deadline of a wall-clock time `wallAt`, taken as "so many seconds from now"
    /// (a time in the past is due now).
    public func monotonicDeadline(wallAt: Double) -> Double {
        monotonic() + max(0, wallAt - wall())
    }

    /// The wall-clock time of a monotonic deadline, for the job object's `nextRetryAt`.
    public func wallTime(ofMonotonic deadline: Double) -> Double {
        wall() + max(0, deadline - monotonic())
    }
}
