import Foundation

#if canImport(Glibc)
    @preconcurrency import Glibc
#endif

/// Signals held (blocked in the calling thread, and in the threads it starts) until their
/// ``SignalWatcher``s are set up: one sent meanwhile waits instead of taking its default action.
/// `aftransferd` holds the stop signals from its first line, so that a SIGTERM during the start
/// (taking the lock, checking the database, recovering 20,000 jobs: ~0.1 s) stops it with 0 once
/// it is up; its default action ended the daemon with 143 (found by an outside audit).
public struct SignalHold {
    /// The signals that stop the daemon.
    public static let stopSignals = [SIGTERM, SIGINT, SIGHUP]

    private var held = sigset_t()
    private var previous = sigset_t()

    /// Blocks `signals` in the calling thread.
    public init(_ signals: [Int32] = SignalHold.stopSignals) {
        sigemptyset(&held)
        for s in signals { sigaddset(&held, s) }
        pthread_sigmask(SIG_BLOCK, &held, &previous)
    }

    /// Lets the held signals through (their watchers are set up): one that came meanwhile is
    /// delivered now.
    public func unblock() {
        var set = held
        pthread_sigmask(SIG_UNBLOCK, &set, nil)
    }

    /// Drops the held signals still pending, then puts the thread's mask back as it was before
    /// ``init(_:)``: a start that failed (exit 1) or a stop that is done ends as it is, not by a
    /// signal's default action.
    public func end() {
        var set = held
        pthread_sigmask(SIG_BLOCK, &set, nil)
        var none = timespec()
        while sigtimedwait(&set, nil, &none) > 0 {}
        var mask = previous
        pthread_sigmask(SIG_SETMASK, &mask, nil)
    }
}
