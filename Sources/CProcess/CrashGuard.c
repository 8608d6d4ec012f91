#define _GNU_SOURCE
#include "CrashGuard.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
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
//
// The array is shared memory (an anonymous MAP_SHARED mapping made when the library loads), so
// the lifeline guard (below), a forked child, reads the very table this process keeps: a group
// recorded or forgotten costs no message to it and never wakes it.

#define JT_GROUP_SLOTS 65536u
#define JT_TOMBSTONE ((pid_t)-1)

/// Used only if the shared mapping cannot be made (the guard then cannot start).
static _Atomic(pid_t) jt_private_groups[JT_GROUP_SLOTS];
static _Atomic(pid_t) *jt_groups = jt_private_groups;
static int jt_groups_shared;

/// How many times the lifeline guard's watchdog has fired (its SIGTERM to every group): counted
/// by the guard, read by this process (jt_lifeline_fired), in shared memory as the table is.
static _Atomic uint64_t jt_private_fired;
static _Atomic uint64_t *jt_watchdog_fired = &jt_private_fired;

__attribute__((constructor)) static void jt_share_groups(void) {
    void *table = mmap(NULL, sizeof jt_private_groups, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (table == MAP_FAILED) return;
    void *fired = mmap(NULL, sizeof jt_private_fired, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (fired == MAP_FAILED) {
        munmap(table, sizeof jt_private_groups);
        return;
    }
    jt_groups = (_Atomic(pid_t) *)table;
    jt_watchdog_fired = (_Atomic uint64_t *)fired;
    jt_groups_shared = 1;
}

// Spawns under way: a job process exists from its exec on, but its group is recorded only once
// posix_spawn has returned. A crash on another thread in between waits (briefly) for the
// spawning thread to record it, so that it is killed too. A crash on the spawning thread itself
// (a signal sent to the process is taken by whichever thread first runs with it unblocked: on a
// loaded machine often the spawning thread, the moment posix_spawn restores its signal mask)
// cannot wait for that thread: it reads the pid where posix_spawn stores it (before it restores
// the mask, so before any handler can run on this thread) and kills that group itself.
static _Atomic int jt_spawns_in_flight;
static _Thread_local int jt_this_thread_spawns;
static _Thread_local pid_t *jt_this_thread_spawn_pid;
// For tests only (JOBTOP_TEST_CRASH_AFTER_SPAWN, read at install).
static int jt_test_crash_after_spawn;

void jt_crash_guard_spawn_begin(pid_t *pid_out) {
    *pid_out = 0;
    jt_this_thread_spawn_pid = pid_out;
    jt_this_thread_spawns = 1;
    atomic_fetch_add_explicit(&jt_spawns_in_flight, 1, memory_order_acq_rel);
}

void jt_crash_guard_spawn_end(void) {
    atomic_fetch_sub_explicit(&jt_spawns_in_flight, 1, memory_order_acq_rel);
    jt_this_thread_spawns = 0;
    jt_this_thread_spawn_pid = NULL;
}

void jt_crash_guard_spawned_test_hook(void) {
    if (jt_test_crash_after_spawn) raise(SIGSEGV);
}

/// In the handler: up to 2 s for spawns on other threads to record their groups (the crashing
/// thread's own spawn, if it was spawning, cannot finish: its child's group is returned, or 0).
/// Only a spawn under way is waited for; on a machine loaded far beyond its cores a spawning
/// thread can wait longer than 200 ms to run again after its child has exec'd.
static pid_t jt_wait_for_spawns(void) {
    int own = jt_this_thread_spawns ? 1 : 0;
    struct timespec pause = {0, 200000};
    for (int i = 0; i < 10000 && atomic_load_explicit(&jt_spawns_in_flight, memory_order_acquire) > own; i++) {
        nanosleep(&pause, NULL);
    }
    return own && jt_this_thread_spawn_pid != NULL ? *jt_this_thread_spawn_pid : 0;
}

// The lifeline (jt_lifeline_start): this process's end of the socket pair to the guard, or -1.
static _Atomic int jt_lifeline_fd = -1;

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

static void jt_write_all(int fd, const char *bytes, size_t length);

// --- The terminal ---------------------------------------------------------------------------

#define JT_RESET_CAPACITY 1024

static struct termios jt_saved_modes;
static int jt_terminal_fd = -1;
// The descriptor the dashboard draws on.
static int jt_screen_fd = -1;
static char jt_reset[JT_RESET_CAPACITY];
static size_t jt_reset_length;
// Written last (release) by the main thread, read first (acquire) by the handler.
static atomic_int jt_terminal_armed;

int jt_crash_guard_capture_terminal(int fd) {
    atomic_store_explicit(&jt_terminal_armed, 0, memory_order_release);
    if (jt_terminal_fd >= 0) {
        close(jt_terminal_fd);
        jt_terminal_fd = -1;
    }
    // A descriptor of its own: on a crash, `fd` is pointed at /dev/null (so that a thread still
    // drawing cannot write over the restored screen) and the reset goes through this one.
    int own = fcntl(fd, F_DUPFD_CLOEXEC, 3);
    if (own < 0) return errno;
    if (tcgetattr(own, &jt_saved_modes) != 0) {
        int error = errno;
        close(own);
        return error;
    }
    jt_terminal_fd = own;
    jt_screen_fd = fd;
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

int jt_crash_guard_restore_terminal_modes(void) {
    if (jt_terminal_fd < 0) return -1;
    return tcsetattr(jt_terminal_fd, TCSANOW, &jt_saved_modes) == 0 ? 0 : errno;
}

// --- Standard error while the dashboard draws -------------------------------------------------

#define JT_REPLAY_LIMIT (64 * 1024)

static int jt_real_stderr = -1;
static int jt_captured_stderr = -1;
static atomic_int jt_stderr_captured;

int jt_crash_guard_capture_stderr(void) {
    if (atomic_load(&jt_stderr_captured)) return 0;
    int memory = memfd_create("jobtop-stderr", MFD_CLOEXEC);
    if (memory < 0) return errno;
    int real = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    if (real < 0 || dup2(memory, STDERR_FILENO) < 0) {
        int error = errno;
        if (real >= 0) close(real);
        close(memory);
        return error;
    }
    jt_real_stderr = real;
    jt_captured_stderr = memory;
    atomic_store_explicit(&jt_stderr_captured, 1, memory_order_release);
    return 0;
}

// Copies the last JT_REPLAY_LIMIT bytes written to the in-memory file to `fd`. Async-signal-safe.
static void jt_replay(int from, int fd) {
    off_t size = lseek(from, 0, SEEK_END);
    if (size <= 0) return;
    off_t offset = size > JT_REPLAY_LIMIT ? size - JT_REPLAY_LIMIT : 0;
    char buffer[4096];
    while (offset < size) {
        ssize_t count = pread(from, buffer, sizeof buffer, offset);
        if (count < 0 && errno == EINTR) continue;
        if (count <= 0) return;
        jt_write_all(fd, buffer, (size_t)count);
        offset += count;
    }
}

// Puts the real standard error back; with `replay`, copies what was captured to it first.
// Async-signal-safe (dup2, close, lseek, pread, write).
static void jt_put_back_stderr(int replay) {
    int expected = 1;
    if (!atomic_compare_exchange_strong(&jt_stderr_captured, &expected, 0)) return;
    dup2(jt_real_stderr, STDERR_FILENO);
    if (replay) jt_replay(jt_captured_stderr, STDERR_FILENO);
    close(jt_real_stderr);
    close(jt_captured_stderr);
    jt_real_stderr = -1;
    jt_captured_stderr = -1;
}

void jt_crash_guard_release_stderr(void) { jt_put_back_stderr(1); }

// --- The handler ----------------------------------------------------------------------------

static const int jt_fatal_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGABRT, SIGFPE};
#define JT_FATAL_COUNT (sizeof jt_fatal_signals / sizeof jt_fatal_signals[0])

static struct sigaction jt_previous[65];
static atomic_int jt_installed;
// 0: nobody is handling a crash; 1: a thread is; 2: it is done (killed, restored, said so).
static atomic_int jt_state;
// The signal being handled (set with `jt_state`'s 1).
static atomic_int jt_crash_signal;
// Set at install from SWIFT_BACKTRACE: whether Swift's crash reporter was told never to stop
// and ask on a terminal.
static int jt_reporter_never_asks;
// For tests only: how long the handler pauses after the clean-up, from JOBTOP_TEST_CRASH_PAUSE_MS
// at install (0: no pause). A pause makes the race with an exit on another thread certain
// (see jt_hold_exit_during_crash).
static long jt_test_pause_ms;

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
    pid_t own_spawn = jt_wait_for_spawns();
    int killed = jt_crash_guard_kill_groups(SIGKILL);
    // Recorded already if the crash came after the recording; killed twice does no harm.
    if (own_spawn > 0 && kill(-own_spawn, SIGKILL) == 0) killed++;
    int restored = 0;
    if (atomic_load_explicit(&jt_terminal_armed, memory_order_acquire)) {
        // The crash may be on another thread than the one drawing, which would go on drawing
        // over the restored screen until the process ends: its descriptor now leads nowhere.
        int nowhere = open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (nowhere >= 0) {
            dup2(nowhere, jt_screen_fd);
            close(nowhere);
        }
        // CAN first: it ends an escape sequence a frame may have left half written.
        jt_write_all(jt_terminal_fd, "\x18", 1);
        jt_write_all(jt_terminal_fd, jt_reset, jt_reset_length);
        tcsetattr(jt_terminal_fd, TCSANOW, &jt_saved_modes);
        restored = 1;
    }
    // What went to standard error while the dashboard drew (the runtime's "Fatal error" line),
    // now on the restored terminal, before the line that says what happened.
    jt_put_back_stderr(1);
    char line[160];
    size_t used = jt_append(line, 0, sizeof line, "jobtop: crashed (");
    used = jt_append(line, used, sizeof line, jt_signal_name(signal_number));
    used = jt_append(line, used, sizeof line, killed > 0 ? "); job processes killed" : "); no job process was running");
    if (restored) used = jt_append(line, used, sizeof line, ", terminal restored");
    used = jt_append(line, used, sizeof line, "\n");
    jt_write_all(STDERR_FILENO, line, used);
}

// The signal's default action from now on (ending the process, with a core dump where enabled).
static void jt_set_default_action(int signal_number) {
    struct sigaction fallback;
    memset(&fallback, 0, sizeof fallback);
    fallback.sa_handler = SIG_DFL;
    sigemptyset(&fallback.sa_mask);
    sigaction(signal_number, &fallback, NULL);
}

static void jt_crash_handler(int signal_number, siginfo_t *info, void *context) {
    int saved_errno = errno;
    // Asked before the clean-up points the screen's descriptor at /dev/null.
    int on_terminal = jt_is_terminal(STDIN_FILENO) && jt_is_terminal(STDOUT_FILENO);
    int expected = 0;
    if (atomic_compare_exchange_strong(&jt_state, &expected, 1)) {
        atomic_store(&jt_crash_signal, signal_number);
        jt_clean_up(signal_number);
        if (jt_test_pause_ms > 0) {
            struct timespec pause = {jt_test_pause_ms / 1000, (jt_test_pause_ms % 1000) * 1000000};
            nanosleep(&pause, NULL);
        }
        atomic_store(&jt_state, 2);
    } else {
        // Another thread crashed first and is cleaning up: let it finish (for at most a
        // second) before this signal ends the process.
        struct timespec pause = {0, 1000000};
        for (int i = 0; i < 1000 && atomic_load(&jt_state) != 2; i++) nanosleep(&pause, NULL);
    }

    // Pass the signal on to what would have handled it without jobtop: Swift's crash reporter
    // (which prints a backtrace), or the default action, which ends the process with the
    // signal (and a core dump where enabled). On a terminal the reporter stops and waits up to
    // 30 s for a key; the jobs are dead and the terminal is back by then, but nothing is gained
    // by the wait, so the default action ends it at once there (unless SWIFT_BACKTRACE says the
    // reporter never asks).
    const struct sigaction *previous = &jt_previous[signal_number];
    int has_handler = (previous->sa_flags & SA_SIGINFO) ? previous->sa_sigaction != NULL
                                                        : (previous->sa_handler != SIG_DFL && previous->sa_handler != SIG_IGN);
    int would_ask = on_terminal && !jt_reporter_never_asks;
    int chains = has_handler && !would_ask;

    // The reporter ends its work by resetting the signal and returning, counting on the fault
    // to happen again. That holds for a fault (a bad access, a Swift trap's ud2, arm64's brk),
    // re-executed as this handler returns, and for abort(), which raises SIGABRT again with the
    // default action if a handler returns. Any other signal (sent with kill, or x86's int3,
    // which moves past its instruction) would let the process run on after the report, so it
    // goes straight to the default action, sent again: it stays pending while this handler
    // runs and ends the process as it returns.
    int is_fault = info != NULL && info->si_code > 0 && signal_number != SIGABRT;
#if !defined(__aarch64__)
    if (signal_number == SIGTRAP) is_fault = 0;
#endif
    int is_abort = signal_number == SIGABRT && info != NULL && info->si_code == SI_TKILL && info->si_pid == getpid();
    if (chains && (is_fault || is_abort)) {
        sigaction(signal_number, previous, NULL);
    } else {
        jt_set_default_action(signal_number);
    }
    if (!is_fault) raise(signal_number);
    errno = saved_errno;
}

// Alternate signal stacks are per thread. One made here is released when its thread exits
// (dispatch's threads come and go), through a thread-specific key's destructor.
#define JT_ALTERNATE_STACK_SIZE (256 * 1024)

static pthread_key_t jt_stack_key;
static pthread_once_t jt_stack_key_once = PTHREAD_ONCE_INIT;

static void jt_release_stack(void *memory) {
    stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    sigaltstack(&off, NULL);
    munmap(memory, JT_ALTERNATE_STACK_SIZE);
}

static void jt_make_stack_key(void) { pthread_key_create(&jt_stack_key, jt_release_stack); }

int jt_crash_guard_prepare_thread(void) {
    pthread_once(&jt_stack_key_once, jt_make_stack_key);
    if (pthread_getspecific(jt_stack_key) != NULL) return 0;
    stack_t current;
    if (sigaltstack(NULL, &current) != 0) return errno;
    if (!(current.ss_flags & SS_DISABLE)) return 0;
    void *memory = mmap(NULL, JT_ALTERNATE_STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (memory == MAP_FAILED) return errno;
    stack_t stack = {.ss_sp = memory, .ss_size = JT_ALTERNATE_STACK_SIZE, .ss_flags = 0};
    if (sigaltstack(&stack, NULL) != 0) {
        int error = errno;
        munmap(memory, JT_ALTERNATE_STACK_SIZE);
        return error;
    }
    pthread_setspecific(jt_stack_key, memory);
    return 0;
}

// A crash handled on one thread kills the job process groups; the jobs' ends then reach the
// rest of jobtop, which may decide the run is over and call exit() on another thread before the
// handler returns and its signal ends the process: jobtop would end with the run's status
// (seen: 1 after a SIGABRT, in a loaded CI run) instead of dying of the signal. An exit that
// starts while a crash is being handled waits here instead: the handler's signal ends the
// process (after Swift's crash reporter, where it runs, has written its backtrace). If it somehow
// has not within ten seconds, the signal is sent again from here.
static void jt_hold_exit_during_crash(void) {
    if (atomic_load(&jt_state) == 0) return;
    struct timespec pause = {0, 10000000};
    for (int i = 0; i < 1000; i++) nanosleep(&pause, NULL);
    int signal_number = atomic_load(&jt_crash_signal);
    if (signal_number > 0) {
        jt_set_default_action(signal_number);
        sigset_t unblock;
        sigemptyset(&unblock);
        sigaddset(&unblock, signal_number);
        pthread_sigmask(SIG_UNBLOCK, &unblock, NULL);
        raise(signal_number);
    }
}

int jt_crash_guard_install(void) {
    int expected = 0;
    if (!atomic_compare_exchange_strong(&jt_installed, &expected, 1)) return 0;
    atexit(jt_hold_exit_during_crash);
    const char *pause = getenv("JOBTOP_TEST_CRASH_PAUSE_MS");
    if (pause != NULL) jt_test_pause_ms = strtol(pause, NULL, 10);
    const char *after_spawn = getenv("JOBTOP_TEST_CRASH_AFTER_SPAWN");
    jt_test_crash_after_spawn = after_spawn != NULL && strcmp(after_spawn, "1") == 0;
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

// --- Lifeline ----------------------------------------------------------------------------------
//
// A process killed with SIGKILL runs no code: its job process groups would live on, unsupervised.
// The guard is a forked child that holds one end of a socket pair whose other end only this
// process holds (close-on-exec, and jobs get no descriptor above 2). It shares the group table
// (shared memory, above), so it always sees the groups recorded now. When its end reaches end of
// file (this process is gone, however it went) the guard kills every group still in the table
// and exits. Groups whose leader was reaped (ended jobs, and the background processes a
// keep_background job leaves) were forgotten first, so they are not touched.
//
// The watchdog (jt_lifeline_watch): a process that is stopped (SIGSTOP, SIGTSTP) is not gone,
// but runs no code either, while its jobs, in process groups of their own, run on. A worker
// arms it while it holds jobs that another machine would run in its place once the worker falls
// silent, and ticks (jt_lifeline_tick) far more often than `timeout`; when no tick has come for
// `timeout`, the guard sends SIGTERM to every recorded group, and SIGKILL `grace` later unless a
// tick came meanwhile. Messages, each one write of at most 17 bytes (never split): 't', a tick;
// 'w' and two int64 (timeout and grace in nanoseconds; a timeout of 0 disarms).

static int64_t jt_monotonic_ns(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
}

static void jt_lifeline_guard(int fd) {
    // In the forked child of a multithreaded process: async-signal-safe calls only (and
    // poll and clock_gettime, which are system calls).
    atomic_store_explicit(&jt_lifeline_fd, -1, memory_order_release);
    prctl(PR_SET_NAME, "jobtop-guard", 0, 0, 0);
    // A session of its own: a kill of the worker's process group (a service manager stopping
    // it, a test's cleanup) does not take the guard along before it has done its work, and a
    // SIGSTOP of that group does not stop it.
    setsid();
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    // Only the end of the socket ends it: not a Ctrl-C to the terminal's group, not a SIGTERM
    // meant for the worker's group.
    sigaction(SIGINT, &ignore, NULL);
    sigaction(SIGTERM, &ignore, NULL);
    sigaction(SIGHUP, &ignore, NULL);
    sigaction(SIGQUIT, &ignore, NULL);
    sigaction(SIGPIPE, &ignore, NULL);
    sigaction(SIGTSTP, &ignore, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    // Holds nothing of the parent's open: not its stdout/stderr (a reader waiting for their end
    // must not wait for the guard), not its sockets.
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
    }
    if (fd != 3) {
        dup2(fd, 3);
        fd = 3;
    }
    syscall(SYS_close_range, 4u, ~0u, 0u);
    unsigned char message[17];
    size_t have = 0;
    int64_t timeout = 0, grace = 0;
    int64_t last_tick = jt_monotonic_ns();
    // 0: quiet; 1: SIGTERM sent at `fired_at`; 2: SIGKILL sent too (nothing more until a tick).
    int stage = 0;
    int64_t fired_at = 0;
    for (;;) {
        int wait_ms = -1;
        if (timeout > 0 && stage < 2) {
            int64_t due = stage == 0 ? last_tick + timeout : fired_at + grace;
            int64_t left = due - jt_monotonic_ns();
            wait_ms = left <= 0 ? 0 : (int)(left / 1000000 + 1);
        }
        struct pollfd ready = {.fd = fd, .events = POLLIN};
        int polled = poll(&ready, 1, wait_ms);
        if (polled < 0) {
            if (errno == EINTR) continue;
            break;
        }
        if (polled == 0) {
            if (stage == 0) {
                // Counted before the first signal: whatever a job does because of it (dies, runs
                // its trap) comes after, so a worker that sees the job's end sees the count too.
                atomic_fetch_add_explicit(jt_watchdog_fired, 1, memory_order_seq_cst);
                jt_crash_guard_kill_groups(SIGTERM);
                // A stopped job (SIGSTOP, the terminal's Ctrl-Z) gets its SIGTERM only once it
                // runs again, as a shell's `kill` does it.
                jt_crash_guard_kill_groups(SIGCONT);
                stage = 1;
                fired_at = jt_monotonic_ns();
            } else {
                jt_crash_guard_kill_groups(SIGKILL);
                stage = 2;
            }
            continue;
        }
        unsigned char buffer[256];
        ssize_t count = read(fd, buffer, sizeof buffer);
        if (count < 0 && (errno == EINTR || errno == EAGAIN)) continue;
        if (count <= 0) break;
        for (ssize_t i = 0; i < count; i++) {
            if (have == 0 && buffer[i] == 't') {
                last_tick = jt_monotonic_ns();
                stage = 0;
                continue;
            }
            message[have++] = buffer[i];
            if (message[0] != 'w') {
                have = 0;  // never sent: ignored
                continue;
            }
            if (have < sizeof message) continue;
            memcpy(&timeout, message + 1, 8);
            memcpy(&grace, message + 9, 8);
            if (grace < 0) grace = 0;
            have = 0;
            last_tick = jt_monotonic_ns();
            stage = 0;
        }
    }
    jt_crash_guard_kill_groups(SIGKILL);
    _exit(0);
}

pid_t jt_lifeline_start(void) {
    if (atomic_load_explicit(&jt_lifeline_fd, memory_order_acquire) >= 0) return 0;
    if (!jt_groups_shared) return -ENOMEM;
    int fds[2];
    // A socket pair, not a pipe: a message to a guard that is gone must fail (MSG_NOSIGNAL),
    // not raise SIGPIPE in this process.
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) return -errno;
    pid_t child = fork();
    if (child < 0) {
        int error = errno;
        close(fds[0]);
        close(fds[1]);
        return -error;
    }
    if (child == 0) {
        close(fds[1]);
        jt_lifeline_guard(fds[0]);
    }
    close(fds[0]);
    atomic_store_explicit(&jt_lifeline_fd, fds[1], memory_order_release);
    return child;
}

/// Sends one message to the guard without ever blocking or raising SIGPIPE.
static int jt_lifeline_send(const void *bytes, size_t count) {
    int fd = atomic_load_explicit(&jt_lifeline_fd, memory_order_acquire);
    if (fd < 0) return -1;
    ssize_t sent;
    do {
        sent = send(fd, bytes, count, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (sent < 0 && errno == EINTR);
    return sent == (ssize_t)count ? 0 : -1;
}

uint64_t jt_lifeline_fired(void) {
    return atomic_load_explicit(jt_watchdog_fired, memory_order_seq_cst);
}

int jt_lifeline_tick(void) {
    const char tick = 't';
    return jt_lifeline_send(&tick, 1);
}

int jt_lifeline_watch(int64_t timeout_ns, int64_t grace_ns) {
    unsigned char message[17];
    message[0] = 'w';
    memcpy(message + 1, &timeout_ns, 8);
    memcpy(message + 9, &grace_ns, 8);
    return jt_lifeline_send(message, sizeof message);
}
