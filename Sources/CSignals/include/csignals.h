// The stop signals while the daemon starts: caught by an async-signal-safe handler (C), handed
// to the daemon once its own watchers take over (TransferCore's SignalHold).
#ifndef AFT_CSIGNALS_H
#define AFT_CSIGNALS_H

/// How long a start may still take after a stop signal came, in seconds: then SIGALRM's default
/// action ends it (a start hung in the kernel, on a FIFO or a dead network file system).
#define AFT_EARLY_STOP_DEADLINE 5

/// Catches SIGTERM, SIGINT and SIGHUP: the first is recorded and arms the start's deadline.
/// Called again while catching, it changes nothing (a signal already recorded is kept).
void aft_early_stop_catch(void);

/// The stop signal recorded since aft_early_stop_catch (0: none), its deadline cancelled.
int aft_early_stop_taken(void);

/// Ends the catch however the start went: the deadline cancelled, and each signal whose handler
/// is still the catch's gets its disposition from before it back (the watchers' replaced it).
void aft_early_stop_release(void);

#endif
