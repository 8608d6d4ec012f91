#ifndef JOBTOP_JOB_STOP_H
#define JOBTOP_JOB_STOP_H

// Stops jobtop's process group as a shell job with `sig` (SIGTSTP for Ctrl-Z; SIGTTIN, SIGTTOU
// in the background) by the signal's default action, and returns once it is continued (`fg`,
// `bg`): 1; or 0 when the kernel did not stop it within 200 ms (an orphaned process group, or
// the signal ignored). The caller gives the terminal back first and takes it again after.
//
// Not ncurses' SIGTSTP handler: that runs on whichever thread the kernel picks, beside the main
// thread's ncurses calls, and lost about one Ctrl-Z in eight. Here the default action stops the
// whole process whichever thread takes the signal, and the return waits for the SIGCONT that
// continues it (counted by a handler), not merely for kill() to return: another thread may take
// the stop a moment after this one went on.
int jt_stop_as_job(int sig);

#endif
