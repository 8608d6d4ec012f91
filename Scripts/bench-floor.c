// The floor for the CLI benchmark: N jobs `sh -c true`, P at a time, each spawned as jobtop
// spawns a job (posix_spawn of /bin/sh with a new session) and waited for; nothing else: no
// pipes, no log, no scheduler. What any job runner must pay on this machine.
//
//   cc -O2 -o floor Scripts/bench-floor.c && ./floor 2000 2
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

extern char **environ;

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 2000;
    int p = argc > 2 ? atoi(argv[2]) : 2;
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSID);
    char *args[] = {"sh", "-c", "true", NULL};
    int started = 0, running = 0, failed = 0;
    while (started < n || running > 0) {
        while (running < p && started < n) {
            pid_t pid;
            if (posix_spawn(&pid, "/bin/sh", NULL, &attr, args, environ) != 0) {
                perror("posix_spawn");
                return 1;
            }
            running++;
            started++;
        }
        int status;
        if (wait(&status) < 0) {
            perror("wait");
            return 1;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
        running--;
    }
    return failed == 0 ? 0 : 1;
}
