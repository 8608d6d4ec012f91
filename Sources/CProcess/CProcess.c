#define _GNU_SOURCE
#include "CProcess.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int jt_spawn(const char *path, char *const argv[], char *const envp[], const char *cwd,
             int stdout_fd, int stderr_fd, pid_t *pid_out) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    int rc = posix_spawn_file_actions_init(&actions);
    if (rc != 0) return rc;
    rc = posix_spawnattr_init(&attr);
    if (rc != 0) { posix_spawn_file_actions_destroy(&actions); return rc; }

    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(&attr, &all);
    posix_spawnattr_setsigmask(&attr, &none);
    // A new session: the job gets its own process group (pgid == pid) and no controlling
    // terminal, so it can neither read the dashboard's keys nor be hit by its Ctrl-C.
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK);

    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&actions, stdout_fd, 1);
    posix_spawn_file_actions_adddup2(&actions, stderr_fd, 2);
    // Nothing else crosses into the job: SwiftNIO opens its sockets without O_CLOEXEC, so a job
    // would otherwise hold the coordinator's worker connections open after the coordinator has
    // closed them (a dropped peer would never see the close while the job lived).
    posix_spawn_file_actions_addclosefrom_np(&actions, 3);
    if (cwd != NULL) posix_spawn_file_actions_addchdir_np(&actions, cwd);

    rc = posix_spawn(pid_out, path, &actions, &attr, argv, envp ? envp : environ);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    return rc;
}

int jt_pidfd_open(pid_t pid) {
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    errno = ENOSYS;
    return -1;
#endif
}

char **jt_environ(void) { return environ; }

int jt_pipe(int fds[2], int nonblocking_read) {
    if (pipe2(fds, O_CLOEXEC) != 0) return errno;
    if (nonblocking_read) {
        int flags = fcntl(fds[0], F_GETFL);
        fcntl(fds[0], F_SETFL, flags | O_NONBLOCK);
    }
    return 0;
}

int jt_wifexited(int status) { return WIFEXITED(status); }
int jt_wexitstatus(int status) { return WEXITSTATUS(status); }
int jt_wifsignaled(int status) { return WIFSIGNALED(status); }
int jt_wtermsig(int status) { return WTERMSIG(status); }
