#ifndef JOBTOP_CNCURSES_SHIM_H
#define JOBTOP_CNCURSES_SHIM_H

// pkg-config's -D_XOPEN_SOURCE=600 is dropped by SwiftPM, so the wide-character API is
// switched on here, before the header is read.
#ifndef _XOPEN_SOURCE_EXTENDED
#define _XOPEN_SOURCE_EXTENDED 1
#endif
#ifndef NCURSES_WIDECHAR
#define NCURSES_WIDECHAR 1
#endif

#include <ncursesw/curses.h>
#include <errno.h>
#include <locale.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <wchar.h>

// Swift 6 rejects C globals as not concurrency-safe; these getters read them on the caller's
// (main) thread instead.
static inline WINDOW *cn_stdscr(void) { return stdscr; }
static inline int cn_cols(void) { return COLS; }
static inline int cn_lines(void) { return LINES; }
static inline int cn_colors(void) { return COLORS; }
static inline int cn_color_pairs(void) { return COLOR_PAIRS; }

// Attribute macros built from NCURSES_BITS are not imported.
static inline attr_t cn_a_normal(void) { return A_NORMAL; }
static inline attr_t cn_a_bold(void) { return A_BOLD; }
static inline attr_t cn_a_reverse(void) { return A_REVERSE; }
static inline attr_t cn_a_underline(void) { return A_UNDERLINE; }
static inline attr_t cn_a_dim(void) { return A_DIM; }
static inline attr_t cn_color_pair(int n) { return COLOR_PAIR(n); }

// wcwidth and nl_langinfo are only declared for some feature macros, which a module's system
// headers do not see; declared here as glibc defines them.
extern int wcwidth(wchar_t character);
static inline int cn_wcwidth(unsigned int character) { return wcwidth((wchar_t)character); }
#include <langinfo.h>
static inline const char *cn_codeset(void) { return nl_langinfo(CODESET); }

// A pipe whose ends are non-blocking and closed on exec, atomically: a job spawned by another
// thread in between must not inherit either end.
#include <fcntl.h>
static inline int cn_pipe(int fds[2]) {
    return pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0 ? 0 : -1;
}

// Function keys are built by the KEY_F(n) macro, which is not imported.
static inline int cn_key_f(int n) { return KEY_F(n); }

// A screen on the process's own stdout/stdin. Unlike initscr, newterm returns NULL for an
// unusable terminal instead of exiting the process.
static inline SCREEN *cn_newterm(void) { return newterm(NULL, stdout, stdin); }

// Sets the attributes and color pair of the standard screen (wattrset is a macro).
static inline void cn_set_attributes(attr_t attributes, short pair) {
    wattr_set(stdscr, attributes, pair, NULL);
}

// --- Signals, self-pipe style --------------------------------------------------------------
//
// The dashboard owns SIGINT, SIGTERM, SIGHUP and SIGWINCH while it runs. The handler only
// writes the signal number to a non-blocking pipe (write is async-signal-safe); the main
// actor reads the pipe through a dispatch read source and acts there, outside signal context.
// The previous dispositions are kept here and put back by cn_restore_signal.
//
// The state lives in static locals of inline functions: file-scope statics in a header are
// not emitted by Swift's C importer, function-local ones are emitted with their function.
static inline int *cn_signal_fd_slot(void) {
    static int fd = -1;
    return &fd;
}

static inline struct sigaction *cn_previous_action(int signal_number) {
    static struct sigaction previous[65];
    return &previous[signal_number];
}

static inline int *cn_has_previous(int signal_number) {
    static int has[65];
    return &has[signal_number];
}

static inline void cn_signal_handler(int signal_number) {
    int saved = errno;
    unsigned char byte = (unsigned char)signal_number;
    int fd = *cn_signal_fd_slot();
    if (fd >= 0) {
        ssize_t ignored = write(fd, &byte, 1);
        (void)ignored;
    }
    errno = saved;
}

static inline void cn_set_signal_pipe(int write_fd) { *cn_signal_fd_slot() = write_fd; }

static inline int cn_install_signal(int signal_number) {
    if (signal_number <= 0 || signal_number >= 65) return -1;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = cn_signal_handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    int result = sigaction(signal_number, &action, cn_previous_action(signal_number));
    if (result == 0) *cn_has_previous(signal_number) = 1;
    return result;
}

// Unblocks a signal on the calling thread, so that it can be delivered there even when the
// process was started with it blocked (a child inherits its parent thread's mask).
static inline int cn_unblock_signal(int signal_number) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, signal_number);
    return pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

static inline int cn_restore_signal(int signal_number) {
    if (signal_number <= 0 || signal_number >= 65 || !*cn_has_previous(signal_number)) return -1;
    *cn_has_previous(signal_number) = 0;
    return sigaction(signal_number, cn_previous_action(signal_number), NULL);
}

// The terminal's size from the kernel, after a SIGWINCH.
#include <sys/ioctl.h>
static inline int cn_window_size(int fd, int *rows, int *cols) {
    struct winsize size;
    if (ioctl(fd, TIOCGWINSZ, &size) != 0) return -1;
    *rows = size.ws_row;
    *cols = size.ws_col;
    return 0;
}

#endif
