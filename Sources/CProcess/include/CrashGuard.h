#ifndef JOBTOP_CRASH_GUARD_H
#define JOBTOP_CRASH_GUARD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

// A last resort for a crash of any kind (SIGSEGV, SIGBUS, SIGILL, SIGTRAP, SIGABRT, SIGFPE):
// kill every job process group, give the terminal back if the dashboard had it, say so on
// stderr in one line, then let the signal go on so the exit status and a core dump stay honest.
//
// Everything the handler needs is prepared in advance in fixed-size storage: it only calls
// async-signal-safe functions (kill, write, tcsetattr, sigaction, raise, nanosleep) and reads
// lock-free atomics.

/// Installs the handler for the fatal signals, on an alternate signal stack for the calling
/// thread (so a stack overflow there is handled too). Idempotent. Returns 0 or an errno value.
int jt_crash_guard_install(void);

/// Gives the calling thread an alternate signal stack if it has none, so that a stack overflow
/// on it still reaches the handler; the stack is released when the thread exits. Cheap once
/// done (a thread-specific lookup), so code that runs on pool threads may call it each time.
/// Returns 0 or an errno value.
int jt_crash_guard_prepare_thread(void);

/// Records a job's process group (its leader's pid, > 0). Lock-free. Returns 1 when recorded,
/// 0 when the table (65,536 groups at once) is full or the id is not a valid group.
int jt_crash_guard_add_group(pid_t group);

/// Forgets a process group recorded by jt_crash_guard_add_group. Lock-free. Returns 1 when it
/// was recorded, 0 otherwise.
int jt_crash_guard_remove_group(pid_t group);

/// Marks the calling thread as spawning a job process (until jt_crash_guard_spawn_end) into
/// `pid_out` (set to 0 here; posix_spawn stores the pid there before it returns): the crash
/// handler waits for another thread's spawn to record its group before killing the groups, and
/// kills the group of a spawn on its own thread (a signal sent to the process can land on the
/// spawning thread the moment posix_spawn unblocks its signals, before the group is recorded).
void jt_crash_guard_spawn_begin(pid_t *pid_out);
void jt_crash_guard_spawn_end(void);

/// For tests only: called between a job's spawn and the recording of its group. With
/// JOBTOP_TEST_CRASH_AFTER_SPAWN=1 in the environment at install, it raises SIGSEGV on the
/// spawning thread (the race a signal sent to the process can hit). Does nothing otherwise.
void jt_crash_guard_spawned_test_hook(void);

/// Sends `signal_number` to every recorded process group; returns how many were signalled.
/// Async-signal-safe.
int jt_crash_guard_kill_groups(int signal_number);

/// Starts the lifeline guard: a forked child that, when this process is gone however it went
/// (SIGKILL included), kills every job process group still recorded (jt_crash_guard_add_group)
/// and exits. Call once, early. Returns the guard's pid, 0 when already started, or -errno.
pid_t jt_lifeline_start(void);

/// Arms the lifeline guard's watchdog (a `timeout_ns` of 0 disarms it): when no tick has come
/// for `timeout_ns`, the guard sends SIGTERM to every recorded process group, and SIGKILL
/// `grace_ns` later unless a tick came meanwhile. For a process that may be stopped (SIGSTOP)
/// while its jobs run on. Returns 0, or -1 when no guard runs (or it is gone).
int jt_lifeline_watch(int64_t timeout_ns, int64_t grace_ns);

/// Tells the guard this process is alive (see jt_lifeline_watch). Never blocks.
int jt_lifeline_tick(void);

/// How many times the watchdog has fired (sent its SIGTERM to every group) since this process
/// started: a job that ended after the count moved may have been ended by it.
uint64_t jt_lifeline_fired(void);

/// The number of process groups recorded now (for tests).
int jt_crash_guard_group_count(void);

/// Saves the terminal modes of `fd` (tcgetattr) as they are now, before the dashboard changes
/// them, and keeps a descriptor of its own for the restore: on a crash, `fd` itself is pointed
/// at /dev/null first, so that a thread still drawing cannot write over the restored screen.
/// Disarms any earlier terminal. Returns 0 or an errno value.
int jt_crash_guard_capture_terminal(int fd);

/// Arms the terminal restore: on a crash, `reset` (the terminal's own sequences to leave the
/// full-screen mode: rmcup, cnorm, sgr0, ...) is written to the captured descriptor and the
/// captured modes are set back. Returns 0, or -1 when no terminal was captured or `reset` is
/// longer than 1,024 bytes.
int jt_crash_guard_arm_terminal(const char *reset, size_t length);

/// Disarms the terminal restore (the dashboard is giving the terminal back itself).
void jt_crash_guard_disarm_terminal(void);

/// Puts back the terminal modes jt_crash_guard_capture_terminal saved (the shell's, from before
/// the dashboard): ncurses takes its idea of them again when it resumes from a stop, when the
/// terminal may be in the job's raw modes. Returns 0, or errno; -1 when nothing was captured.
int jt_crash_guard_restore_terminal_modes(void);

/// While the dashboard draws, standard error goes to an in-memory file instead of the screen
/// (a message there would garble the screen, and the alternate screen would then swallow it):
/// among others the Swift runtime's "Fatal error: ..." line before a trap. A crash writes the
/// end of it to the real standard error after the terminal is restored. Returns 0 or an errno
/// value (standard error is then left alone).
int jt_crash_guard_capture_stderr(void);

/// Puts the real standard error back and copies what was written meanwhile to it (at most its
/// last 64 KiB).
void jt_crash_guard_release_stderr(void);

#endif
