import CSignals
import Foundation

/// The stop signals (SIGTERM, SIGINT, SIGHUP) caught from `aftransferd`'s first line until the
/// daemon's ``SignalWatcher``s take them over: one that comes while the daemon starts (taking the
/// lock, checking the database, recovering 20,000 jobs: ~0.1 s) is recorded, and the daemon stops
/// with 0 as soon as it is up. Their default action ended it with 143 (found by an outside
/// audit); blocking them instead left a start hung in the kernel (a FIFO in the database's
/// place, a dead network file system) deaf to SIGTERM and Ctrl-C, so a start still under way 5 s
/// after the signal ends by SIGALRM. The handler is C (`CSignals`): async-signal-safe.
public enum SignalHold {
    /// Catches the stop signals until ``takeOver()``.
    public static func catchStopSignals() { aft_early_stop_catch() }

    /// The stop signal that came during the start, if any (its deadline cancelled): call once the
    /// watchers are set up, which from then on receive the signals.
    public static func takeOver() -> Int32? {
        let sig = aft_early_stop_taken()
        return sig == 0 ? nil : sig
    }

    /// Ends the catch, however the start went (a failed one too): the deadline cancelled, and the
    /// dispositions from before it back where no watcher replaced them.
    public static func release() { aft_early_stop_release() }
}
