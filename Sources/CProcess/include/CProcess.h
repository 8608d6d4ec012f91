#ifndef JOBTOP_CPROCESS_H
#define JOBTOP_CPROCESS_H

#include <sys/types.h>

// The fatal-signal handler and its table of job process groups (this header is the module's
// umbrella: SwiftPM imports only what it includes).
#include "CrashGuard.h"

/// Spawns `path` with `argv` in a new session (so a new process group whose id is the pid),
/// stdin from /dev/null, stdout/stderr onto the given write ends, in `cwd` when not NULL, with
/// every signal reset to its default disposition and an empty signal mask.
/// `envp` NULL means the current environment. Returns 0 or an errno value.
int jt_spawn(const char *path, char *const argv[], char *const envp[], const char *cwd,
             int stdout_fd, int stderr_fd, pid_t *pid_out);

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

#endif
