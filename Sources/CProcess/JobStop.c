#include "JobStop.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

// SIGCONTs seen while jt_stop_as_job waits (its handler counts them).
static atomic_int jt_continues;

static void jt_count_continue(int sig) {
    (void)sig;
    atomic_fetch_add(&jt_continues, 1);
}

int jt_stop_as_job(int sig) {
    struct sigaction stop, previous_stop, count, previous_count;
    memset(&stop, 0, sizeof stop);
    stop.sa_handler = SIG_DFL;
    sigemptyset(&stop.sa_mask);
    memset(&count, 0, sizeof count);
    count.sa_handler = jt_count_continue;
    count.sa_flags = SA_RESTART;
    sigemptyset(&count.sa_mask);
    sigaction(SIGCONT, &count, &previous_count);
    sigaction(sig, &stop, &previous_stop);
    sigset_t set, previous_mask;
    sigemptyset(&set);
    sigaddset(&set, sig);
    sigaddset(&set, SIGCONT);
    pthread_sigmask(SIG_UNBLOCK, &set, &previous_mask);
    int before = atomic_load(&jt_continues);
    kill(0, sig);
    // Stopped and continued: a SIGCONT came. Not stopped within 200 ms: the kernel dropped the
    // stop (an orphaned process group) or the signal is ignored.
    int continued = 0;
    for (int waited = 0; waited < 200; waited++) {
        if (atomic_load(&jt_continues) != before) {
            continued = 1;
            break;
        }
        struct timespec pause = {0, 1000000};
        nanosleep(&pause, NULL);
    }
    pthread_sigmask(SIG_SETMASK, &previous_mask, NULL);
    sigaction(sig, &previous_stop, NULL);
    sigaction(SIGCONT, &previous_count, NULL);
    return continued;
}
