#define _GNU_SOURCE
#include "CrashGuard.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

// --- Job process groups ---------------------------------------------------------------------
//
// An open-addressing hash set of pids in a fixed array, lock-free: a slot goes 0 (never used)
// -> pid -> TOMBSTONE -> pid -> ... and never back to 0. A group is inserted at the first free
// slot (0 or TOMBSTONE) of its probe sequence, so every slot before it on that sequence was in
// use when it was inserted and is still not 0 later: removal probes until it finds the pid or a
// 0. The crash handler only reads the slots.

#define JT_GROUP_SLOTS 65536u
#define JT_TOMBSTONE ((pid_t)-1)

static _Atomic(pid_t) jt_groups[JT_GROUP_SLOTS];

static unsigned jt_group_start(pid_t group) {
    // Fibonacci hashing spreads consecutive pids over the table.
    return (unsigned)(((uint32_t)group * 2654435761u) >> 16) & (JT_GROUP_SLOTS - 1);
}

int jt_crash_guard_add_group(pid_t group) {
    // 0 and negative ids are never recorded: kill(-0) would hit jobtop's own group.
    if (group <= 0) return 0;
    unsigned start = jt_group_start(group);
    for (unsigned i = 0; i < JT_GROUP_SLOTS; i++) {
        _Atomic(pid_t) *slot = &jt_groups[(start + i) & (JT_GROUP_SLOTS - 1)];
        pid_t seen = atomic_load_explicit(slot, memory_order_relaxed);
        while (seen == 0 || seen == JT_TOMBSTONE) {
            if (atomic_compare_exchange_weak_explicit(slot, &seen, group, memory_order_release, memory_order_relaxed)) {
                return 1;
            }
        }
    }
    return 0;
}

int jt_crash_guard_remove_group(pid_t group) {
    if (group <= 0) return 0;
    unsigned start = jt_group_start(group);
    for (unsigned i = 0; i < JT_GROUP_SLOTS; i++) {
        _Atomic(pid_t) *slot = &jt_groups[(start + i) & (JT_GROUP_SLOTS - 1)];
        pid_t seen = atomic_load_explicit(slot, memory_order_acquire);
        if (seen == group) {
            return atomic_compare_exchange_strong_explicit(slot, &seen, JT_TOMBSTONE, memory_order_release, memory_order_relaxed);
        }
        if (seen == 0) return 0;
    }
    return 0;
}

int jt_crash_guard_kill_groups(int signal_number) {
    int count = 0;
    for (unsigned i = 0; i < JT_GROUP_SLOTS; i++) {
        pid_t group = atomic_load_explicit(&jt_groups[i], memory_order_acquire);
        if (group > 0) {
            kill(-group, signal_number);
            count++;
        }
    }
    return count;
}

int jt_crash_guard_group_count(void) {
    int count = 0;
    for (unsigned i = 0; i < JT_GROUP_SLOTS; i++) {
        if (atomic_load_explicit(&jt_groups[i], memory_order_relaxed) > 0) count++;
    }
    return count;
}

// --- The terminal ---------------------------------------------------------------------------

#define JT_RESET_CAPACITY 1024

static struct termios jt_saved_modes;
static int jt_terminal_fd = -1;
static char jt_reset[JT_RESET_CAPACITY];
static size_t jt_reset_length;
// Written last (release) by the main thread, read first (acquire) by the handler.
static atomic_int jt_terminal_armed;

int jt_crash_guard_capture_terminal(int fd) {
    atomic_store_explicit(&jt_terminal_armed, 0, memory_order_release);
    if (tcgetattr(fd, &jt_saved_modes) != 0) {
        jt_terminal_fd = -1;
        return errno;
    }
    jt_terminal_fd = fd;
    return 0;
}

int jt_crash_guard_arm_terminal(const char *reset, size_t length) {
    if (jt_terminal_fd < 0 || length > JT_RESET_CAPACITY) return -1;
    atomic_store_explicit(&jt_terminal_armed, 0, memory_order_release);
    memcpy(jt_reset, reset, length);
    jt_reset_length = length;
    atomic_store_explicit(&jt_terminal_armed, 1, memory_order_release);
    return 0;
}

void jt_crash_guard_disarm_terminal(void) { atomic_store_explicit(&jt_terminal_armed, 0, memory_order_release); }

// --- The handler ----------------------------------------------------------------------------

static const int jt_fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGABRT, SIGFPE};
#define JT_FATAL_COUNT (sizeof jt_fatal_signals / sizeof jt_fatal_signals[0])

static struct sigaction jt_previous[65];
static atomic_int jt_installed;
// 0: nobody is handling a crash; 1: a thread is; 2: it is done (killed, restored, said so).
static atomic_int jt_state;
// Set at install from SWIFT_BACKTRACE: whether Swift's crash reporter was told never to stop
// and ask on a terminal.
static int jt_reporter_never_asks;

static const char *jt_signal_name(int signal_number) {
    switch (signal_number) {
    case SIGSEGV: return "SIGSEGV";
    case SIGBUS: return "SIGBUS";
    case SIGILL: return "SIGILL";
    case SIGTRAP: return "SIGTRAP";
    case SIGABRT: return "SIGABRT";
    case SIGFPE: return "SIGFPE";
    default: return "a fatal signal";
    }
}

static size_t jt_append(char *buffer, size_t used, size_t capacity, const char *text) {
    while (*text && used < capacity) buffer[used++] = *text++;
    return used;
}

static void jt_write_all(int fd, const char *bytes, size_t length) {
    while (length > 0) {
        ssize_t written = write(fd, bytes, length);
        if (written < 0 && errno == EINTR) continue;
        if (written <= 0) return;
        bytes += written;
        length -= (size_t)written;
    }
}

static int jt_is_terminal(int fd) {
    struct termios modes;
    return tcgetattr(fd, &modes) == 0;
}

static void jt_clean_up(int signal_number) {
    int killed = jt_crash_guard_kill_groups(SIGKILL);
    int restored = 0;
    if (atomic_load_explicit(&jt_terminal_armed, memory_order_acquire)) {
        jt_write_all(jt_terminal_fd, jt_reset, jt_reset_length);
        tcsetattr(jt_terminal_fd, TCSANOW, &jt_saved_modes);
        restored = 1;
    }
    char line[160];
    size_t used = jt_append(line, 0, sizeof line, "jobtop: crashed (");
    used = jt_append(line, used, sizeof line, jt_signal_name(signal_number));
    used = jt_append(line, used, sizeof line, killed > 0 ? "); job processes killed" : "); no job process was running");
    if (restored) used = jt_append(line, used, sizeof line, ", terminal restored");
    used = jt_append(line, used, sizeof line, "\n");
    jt_write_all(STDERR_FILENO, line, used);
}

static void jt_crash_handler(int signal_number, siginfo_t *info, void *context) {
    int saved_errno = errno;
    int expected = 0;
    if (atomic_compare_exchange_strong(&jt_state, &expected, 1)) {
        jt_clean_up(signal_number);
        atomic_store(&jt_state, 2);
    } else {
        // Another thread crashed first and is cleaning up: let it finish (for at most a
        // second) before this signal ends the process.
        struct timespec pause = {0, 1000000};
        for (int i = 0; i < 1000 && atomic_load(&jt_state) != 2; i++) nanosleep(&pause, NULL);
    }

    // Pass the signal on to what would have handled it without jobtop: Swift's crash reporter
    // (which prints a backtrace, then ends the process with the signal), or the default action.
    // On a terminal the reporter stops and waits up to 30 s for a key; the jobs are dead and
    // the terminal is back by then, but nothing is gained by the wait, so the default action
    // ends it at once there (unless SWIFT_BACKTRACE says the reporter never asks).
    struct sigaction next = jt_previous[signal_number];
    int has_handler = (next.sa_flags & SA_SIGINFO) ? next.sa_sigaction != NULL
                                                   : (next.sa_handler != SIG_DFL && next.sa_handler != SIG_IGN);
    int would_ask = jt_is_terminal(STDIN_FILENO) && jt_is_terminal(STDOUT_FILENO) && !jt_reporter_never_asks;
    if (!has_handler || would_ask) {
        memset(&next, 0, sizeof next);
        next.sa_handler = SIG_DFL;
        sigemptyset(&next.sa_mask);
    }
    sigaction(signal_number, &next, NULL);

    // A fault (a bad access, a Swift trap's ud2) happens again when the handler returns, now
    // reaching the next handler with its own details. A signal that was sent (kill, raise,
    // abort) or a trap that moved past its instruction (int3) is sent again: it stays pending
    // while this handler runs and is delivered as it returns.
    int was_sent = info == NULL || info->si_code <= 0;
    if (was_sent || signal_number == SIGTRAP || signal_number == SIGABRT) raise(signal_number);
    (void)context;
    errno = saved_errno;
}

int jt_crash_guard_prepare_thread(void) {
    stack_t current;
    if (sigaltstack(NULL, &current) != 0) return errno;
    if (!(current.ss_flags & SS_DISABLE)) return 0;
    size_t size = 256 * 1024;
    void *memory = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) return errno;
    stack_t stack = {.ss_sp = memory, .ss_size = size, .ss_flags = 0};
    if (sigaltstack(&stack, NULL) != 0) {
        int error = errno;
        munmap(memory, size);
        return error;
    }
    return 0;
}

int jt_crash_guard_install(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&jt_installed, &expected, 1)) return 0;
    const char *settings = getenv("SWIFT_BACKTRACE");
    if (settings != NULL) {
        jt_reporter_never_asks = strstr(settings, "interactive=no") != NULL || strstr(settings, "interactive=false") != NULL
                                 || strstr(settings, "interactive=0") != NULL || strstr(settings, "enable=no") != NULL;
    }
    int result = jt_crash_guard_prepare_thread();
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_sigaction = jt_crash_handler;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    // One fatal signal at a time on a thread: a second one inside the handler ends the process.
    sigemptyset(&action.sa_mask);
    for (size_t i = 0; i < JT_FATAL_COUNT; i++) sigaddset(&action.sa_mask, jt_fatal_signals[i]);
    for (size_t i = 0; i < JT_FATAL_COUNT; i++) {
        int signal_number = jt_fatal_signals[i];
        if (sigaction(signal_number, &action, &jt_previous[signal_number]) != 0 && result == 0) result = errno;
    }
    // A process started with these blocked (a child inherits its parent thread's mask) would
    // never see one sent by kill; threads started from here on inherit the unblocked mask.
    pthread_sigmask(SIG_UNBLOCK, &action.sa_mask, NULL);
    return result;
}
