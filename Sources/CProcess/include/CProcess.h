#ifndef JOBTOP_CPROCESS_H
#define JOBTOP_CPROCESS_H

#include "CacheHint.h"
#include <stdint.h>
#include <sys/types.h>

// The fatal-signal handler and its table of job process groups (this header is the module's
// umbrella: SwiftPM imports only what it includes).
#include "CrashGuard.h"
// Ctrl-Z and background stops of the dashboard.
#include "JobStop.h"

/// Spawns `path` with `argv` in a new session (so a new process group whose id is the pid),
/// stdin from /dev/null, stdout/stderr onto the given write ends, in `cwd` when not NULL, with
/// every signal reset to its default disposition and an empty signal mask.
/// `envp` NULL means the current environment. Returns 0 or an errno value. The new process group
/// is recorded for the crash guard as soon as posix_spawn returns; `recorded` says whether the
/// guard's table had room (1) or not (0: the caller keeps it elsewhere). With `recorded` NULL
/// (a helper process, not a job) nothing is recorded.
int jt_spawn(const char *path, char *const argv[], char *const envp[], const char *cwd,
             int stdout_fd, int stderr_fd, pid_t *pid_out, int *recorded);

/// jt_spawn with stdin from `stdin_fd` (-1: /dev/null) and, when `new_session` is 0, in the
/// caller's session and process group. Every descriptor above 2 is closed in the child.
int jt_spawn_io(const char *path, char *const argv[], char *const envp[], const char *cwd,
                int stdin_fd, int stdout_fd, int stderr_fd, int new_session, pid_t *pid_out,
                int *recorded);

/// What one I/O thread spawns job processes with, set up once and reused: the attributes and
/// file actions of jt_spawn (a new session, default signals, an empty mask, stdin from
/// /dev/null, every descriptor above 2 closed), with stdout and stderr taken from two fixed
/// descriptors of its own that hold the write ends of the next job's pipes, made ahead of time
/// (jt_spawner_prepare). Building the file actions for each spawn cost six getrlimit calls
/// (glibc checks each descriptor named against the limit) and two allocations; the pipes,
/// four more system calls between a job's end and its slot's next spawn. Not thread-safe: one
/// thread uses it.
typedef struct jt_spawner jt_spawner;

/// A spawner, or NULL with errno (no descriptor or memory).
jt_spawner *jt_spawner_create(void);

/// Makes the next job's pipes if they are not made yet (the read ends O_NONBLOCK, all O_CLOEXEC).
/// 0 or an errno value.
int jt_spawner_prepare(jt_spawner *spawner);

/// Spawns `path` as jt_spawn does (no working directory), with the prepared pipes (made now if
/// they are not): returns their read ends in `stdout_read` and `stderr_read`; the write ends are
/// the child's alone once it returns. 0 or an errno value (then nothing is left open).
int jt_spawner_spawn(jt_spawner *spawner, const char *path, char *const argv[], char *const envp[],
                     pid_t *pid_out, int *recorded, int *stdout_read, int *stderr_read);

/// pidfd_open(2); -1 with errno on failure (ENOSYS on old kernels).
int jt_pidfd_open(pid_t pid);

/// The process environment (`environ`), which Swift 6 cannot read as a global.
char **jt_environ(void);

/// Creates a pipe with O_CLOEXEC; `nonblocking_read` sets O_NONBLOCK on the read end. 0 or errno.
int jt_pipe(int fds[2], int nonblocking_read);

/// WIFEXITED/WEXITSTATUS/WIFSIGNALED/WTERMSIG, which are macros.
int jt_wifexited(int status);
int jt_wexitstatus(int status);
int jt_wifsignaled(int status);
int jt_wtermsig(int status);

/// epoll_create1(EPOLL_CLOEXEC); -1 with errno on failure.
int jt_epoll_create(void);

/// Watches `fd` for input (or hang-up, or error: all of them mean "read it now"), level-triggered;
/// `token` comes back from jt_epoll_wait. 0 or an errno value.
int jt_epoll_add(int epfd, int fd, uint64_t token);

/// Stops watching `fd`. 0 or an errno value.
int jt_epoll_remove(int epfd, int fd);

/// epoll_wait: fills `tokens` with the tokens of up to `max` ready descriptors and returns how
/// many, or -1 with errno (EINTR included). `timeout_ms` -1 waits for ever.
int jt_epoll_wait(int epfd, uint64_t *tokens, int max, int timeout_ms);

/// An eventfd (close-on-exec, non-blocking) to wake an epoll loop; -1 with errno on failure.
int jt_eventfd(void);

/// Adds 1 to an eventfd (wakes whoever polls it).
void jt_eventfd_signal(int fd);

/// Resets an eventfd to zero.
void jt_eventfd_drain(int fd);

/// Counts, with one pass over /proc, the processes that are not zombies in each of the process
/// groups `groups` (sorted ascending, `count` of them); `members[i]` gets the count of
/// `groups[i]`. Returns 0 or an errno value.
int jt_count_group_members(const pid_t *groups, int count, int *members);

/// The number of file descriptors this process has open (entries of /proc/self/fd), or -1.
int jt_count_open_fds(void);

/// The resource limits jobtop looks at: 0 = RLIMIT_NOFILE, 1 = RLIMIT_NPROC.
/// `UINT64_MAX` stands for RLIM_INFINITY. 0 or an errno value.
int jt_get_limit(int which, uint64_t *soft, uint64_t *hard);

/// Sets the soft limit of `which` (as in jt_get_limit), keeping the hard one. 0 or an errno value.
int jt_set_soft_limit(int which, uint64_t soft);

/// Names the calling thread (at most 15 bytes show), for `top -H` and /proc.
void jt_set_thread_name(const char *name);

#endif
