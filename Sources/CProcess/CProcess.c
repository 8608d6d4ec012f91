#define _GNU_SOURCE
#include "CProcess.h"
#include "CrashGuard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

int jt_spawn(const char *path, char *const argv[], char *const envp[], const char *cwd,
             int stdout_fd, int stderr_fd, pid_t *pid_out, int *recorded) {
    return jt_spawn_io(path, argv, envp, cwd, -1, stdout_fd, stderr_fd, 1, pid_out, recorded);
}

/// The attributes and file actions every job spawn uses (both initialized here): default signal
/// dispositions, an empty mask, a new session when `new_session`, stdin from `stdin_fd` (-1:
/// /dev/null), stdout and stderr from the given descriptors, nothing else.
static void jt_spawn_set_up(posix_spawnattr_t *attr, posix_spawn_file_actions_t *actions,
                            int stdin_fd, int stdout_fd, int stderr_fd, int new_session) {
    posix_spawnattr_init(attr);
    sigset_t all, none;
    sigfillset(&all);
    sigemptyset(&none);
    posix_spawnattr_setsigdefault(attr, &all);
    posix_spawnattr_setsigmask(attr, &none);
    short flags = POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK;
    // A new session: the job gets its own process group (pgid == pid) and no controlling
    // terminal, so it can neither read the dashboard's keys nor be hit by its Ctrl-C.
    if (new_session) flags |= POSIX_SPAWN_SETSID;
    posix_spawnattr_setflags(attr, flags);

    posix_spawn_file_actions_init(actions);
    if (stdin_fd >= 0) {
        posix_spawn_file_actions_adddup2(actions, stdin_fd, 0);
    } else {
        posix_spawn_file_actions_addopen(actions, 0, "/dev/null", O_RDONLY, 0);
    }
    posix_spawn_file_actions_adddup2(actions, stdout_fd, 1);
    posix_spawn_file_actions_adddup2(actions, stderr_fd, 2);
    // Nothing else crosses into the job: SwiftNIO opens its sockets without O_CLOEXEC, so a job
    // would otherwise hold the coordinator's worker connections open after the coordinator has
    // closed them (a dropped peer would never see the close while the job lived).
    posix_spawn_file_actions_addclosefrom_np(actions, 3);
}

/// posix_spawn, with the new process group recorded for the crash guard before the caller sees
/// the pid (a crash in between waits for it, CrashGuard.c) unless `recorded` is NULL.
static int jt_spawn_recording(pid_t *pid_out, const char *path, const posix_spawn_file_actions_t *actions,
                              const posix_spawnattr_t *attr, char *const argv[], char *const envp[], int *recorded) {
    if (recorded != NULL) jt_crash_guard_spawn_begin(pid_out);
    int rc = posix_spawn(pid_out, path, actions, attr, argv, envp ? envp : environ);
    if (recorded != NULL) {
        if (rc == 0) jt_crash_guard_spawned_test_hook();
        *recorded = rc == 0 ? jt_crash_guard_add_group(*pid_out) : 0;
        jt_crash_guard_spawn_end();
    }
    return rc;
}

int jt_spawn_io(const char *path, char *const argv[], char *const envp[], const char *cwd,
                int stdin_fd, int stdout_fd, int stderr_fd, int new_session, pid_t *pid_out,
                int *recorded) {
    posix_spawn_file_actions_t actions;
    posix_spawnattr_t attr;
    jt_spawn_set_up(&attr, &actions, stdin_fd, stdout_fd, stderr_fd, new_session);
    if (cwd != NULL) posix_spawn_file_actions_addchdir_np(&actions, cwd);
    int rc = jt_spawn_recording(pid_out, path, &actions, &attr, argv, envp, recorded);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    return rc;
}

struct jt_spawner {
    posix_spawnattr_t attr;
    posix_spawn_file_actions_t actions;
    int devnull;
    /// Hold the write ends of the next job's stdout and stderr pipes (dup3'd there), or
    /// /dev/null between a spawn and the next jt_spawner_prepare.
    int out_slot, err_slot;
    /// The next job's read ends; -1 when not prepared.
    int out_read, err_read;
};

jt_spawner *jt_spawner_create(void) {
    jt_spawner *spawner = calloc(1, sizeof *spawner);
    if (spawner == NULL) return NULL;
    spawner->out_read = spawner->err_read = -1;
    spawner->devnull = open("/dev/null", O_RDWR | O_CLOEXEC);
    spawner->out_slot = spawner->devnull < 0 ? -1 : fcntl(spawner->devnull, F_DUPFD_CLOEXEC, 0);
    spawner->err_slot = spawner->devnull < 0 ? -1 : fcntl(spawner->devnull, F_DUPFD_CLOEXEC, 0);
    if (spawner->devnull < 0 || spawner->out_slot < 0 || spawner->err_slot < 0) {
        int saved = errno;
        if (spawner->devnull >= 0) close(spawner->devnull);
        if (spawner->out_slot >= 0) close(spawner->out_slot);
        free(spawner);
        errno = saved;
        return NULL;
    }
    jt_spawn_set_up(&spawner->attr, &spawner->actions, spawner->devnull, spawner->out_slot, spawner->err_slot, 1);
    return spawner;
}

/// A pipe whose write end goes to `slot` (the only descriptor left of it here); returns the
/// read end in `read_end`. 0 or errno.
static int jt_spawner_pipe(int slot, int *read_end) {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return errno;
    if (fcntl(fds[0], F_SETFL, O_NONBLOCK) != 0 || dup3(fds[1], slot, O_CLOEXEC) < 0) {
        int saved = errno;
        close(fds[0]);
        close(fds[1]);
        return saved;
    }
    close(fds[1]);
    *read_end = fds[0];
    return 0;
}

/// Points the slots back at /dev/null (closing the write ends they held) and forgets the
/// read ends (closing them when `close_reads`).
static void jt_spawner_release(jt_spawner *spawner, int close_reads) {
    dup3(spawner->devnull, spawner->out_slot, O_CLOEXEC);
    dup3(spawner->devnull, spawner->err_slot, O_CLOEXEC);
    if (close_reads) {
        if (spawner->out_read >= 0) close(spawner->out_read);
        if (spawner->err_read >= 0) close(spawner->err_read);
    }
    spawner->out_read = spawner->err_read = -1;
}

int jt_spawner_prepare(jt_spawner *spawner) {
    if (spawner->out_read >= 0 && spawner->err_read >= 0) return 0;
    int rc = spawner->out_read >= 0 ? 0 : jt_spawner_pipe(spawner->out_slot, &spawner->out_read);
    if (rc == 0 && spawner->err_read < 0) rc = jt_spawner_pipe(spawner->err_slot, &spawner->err_read);
    if (rc != 0) jt_spawner_release(spawner, 1);
    return rc;
}

int jt_spawner_spawn(jt_spawner *spawner, const char *path, char *const argv[], char *const envp[],
                     pid_t *pid_out, int *recorded, int *stdout_read, int *stderr_read) {
    int rc = jt_spawner_prepare(spawner);
    if (rc != 0) return rc;
    rc = jt_spawn_recording(pid_out, path, &spawner->actions, &spawner->attr, argv, envp, recorded);
    if (rc != 0) {
        // The pipes stay prepared for the next spawn.
        return rc;
    }
    *stdout_read = spawner->out_read;
    *stderr_read = spawner->err_read;
    // The child has its own copies: the write ends here go, or the job's pipes would never end.
    jt_spawner_release(spawner, 0);
    return 0;
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

int jt_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int jt_epoll_add(int epfd, int fd, uint64_t token) {
    struct epoll_event event;
    memset(&event, 0, sizeof event);
    event.events = EPOLLIN;
    event.data.u64 = token;
    return epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &event) == 0 ? 0 : errno;
}

int jt_epoll_remove(int epfd, int fd) {
    struct epoll_event event;
    memset(&event, 0, sizeof event);
    return epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &event) == 0 ? 0 : errno;
}

int jt_epoll_wait(int epfd, uint64_t *tokens, int max, int timeout_ms) {
    struct epoll_event events[256];
    if (max > 256) max = 256;
    int count = epoll_wait(epfd, events, max, timeout_ms);
    for (int i = 0; i < count; i++) tokens[i] = events[i].data.u64;
    return count;
}

int jt_eventfd(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

void jt_eventfd_signal(int fd) {
    uint64_t one = 1;
    while (write(fd, &one, sizeof one) < 0 && errno == EINTR) {}
}

void jt_eventfd_drain(int fd) {
    uint64_t value;
    while (read(fd, &value, sizeof value) < 0 && errno == EINTR) {}
}

static int compare_pids(const void *a, const void *b) {
    pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;
    return (x > y) - (x < y);
}

int jt_count_group_members(const pid_t *groups, int count, int *members) {
    for (int i = 0; i < count; i++) members[i] = 0;
    DIR *proc = opendir("/proc");
    if (proc == NULL) return errno;
    struct dirent *entry;
    char path[64];
    char stat[512];
    while ((entry = readdir(proc)) != NULL) {
        if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
        snprintf(path, sizeof path, "/proc/%s/stat", entry->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0) continue;
        ssize_t length = read(fd, stat, sizeof stat - 1);
        close(fd);
        if (length <= 0) continue;
        stat[length] = 0;
        // "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses, so parse from
        // the last ')'.
        char *close_paren = strrchr(stat, ')');
        if (close_paren == NULL) continue;
        char state;
        int ppid, pgrp;
        if (sscanf(close_paren + 1, " %c %d %d", &state, &ppid, &pgrp) != 3) continue;
        if (state == 'Z' || state == 'X') continue;
        pid_t key = (pid_t)pgrp;
        const pid_t *found = bsearch(&key, groups, (size_t)count, sizeof(pid_t), compare_pids);
        if (found != NULL) members[found - groups]++;
    }
    closedir(proc);
    return 0;
}

int jt_count_open_fds(void) {
    DIR *directory = opendir("/proc/self/fd");
    if (directory == NULL) return -1;
    int count = 0;
    struct dirent *entry;
    while ((entry = readdir(directory)) != NULL) {
        if (entry->d_name[0] != '.') count++;
    }
    closedir(directory);
    return count - 1;  // the directory's own descriptor
}

static int resource_of(int which) { return which == 0 ? RLIMIT_NOFILE : RLIMIT_NPROC; }

int jt_get_limit(int which, uint64_t *soft, uint64_t *hard) {
    struct rlimit limit;
    if (getrlimit(resource_of(which), &limit) != 0) return errno;
    *soft = limit.rlim_cur == RLIM_INFINITY ? UINT64_MAX : (uint64_t)limit.rlim_cur;
    *hard = limit.rlim_max == RLIM_INFINITY ? UINT64_MAX : (uint64_t)limit.rlim_max;
    return 0;
}

int jt_set_soft_limit(int which, uint64_t soft) {
    struct rlimit limit;
    if (getrlimit(resource_of(which), &limit) != 0) return errno;
    limit.rlim_cur = soft == UINT64_MAX ? RLIM_INFINITY : (rlim_t)soft;
    return setrlimit(resource_of(which), &limit) == 0 ? 0 : errno;
}

void jt_set_thread_name(const char *name) { pthread_setname_np(pthread_self(), name); }
