#include "csignals.h"

#include <signal.h>
#include <unistd.h>

static volatile sig_atomic_t early_stop = 0;
static const int stop_signals[3] = {SIGTERM, SIGINT, SIGHUP};
static struct sigaction previous[3];

static void early_stop_handler(int sig) {
    if (early_stop == 0) {
        early_stop = sig;
        alarm(AFT_EARLY_STOP_DEADLINE);
    }
}

void aft_early_stop_catch(void) {
    // Already catching (aftransferd's first line, then the daemon's start): a signal recorded in
    // between is kept, not forgotten.
    struct sigaction now;
    if (sigaction(SIGTERM, NULL, &now) == 0 && now.sa_handler == early_stop_handler) return;
    early_stop = 0;
    struct sigaction sa;
    sa.sa_handler = early_stop_handler;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    for (int i = 0; i < 3; i++) sigaction(stop_signals[i], &sa, &previous[i]);
}

int aft_early_stop_taken(void) {
    alarm(0);
    return (int)early_stop;
}

void aft_early_stop_release(void) {
    alarm(0);
    for (int i = 0; i < 3; i++) {
        struct sigaction now;
        if (sigaction(stop_signals[i], NULL, &now) == 0 && now.sa_handler == early_stop_handler)
            sigaction(stop_signals[i], &previous[i], NULL);
    }
}
