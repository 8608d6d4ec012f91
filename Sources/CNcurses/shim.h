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
#include <locale.h>
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

// The mouse: clicks of the first button and the wheel (buttons 4 and 5), reported at once
// (no click interval: a press is acted on, not held for a double click).
//
// Every button event is in the mask, also those the dashboard ignores (releases, other
// buttons): ncurses, handed a mouse report its mask leaves out, reads on for the next one
// with a blocking read even in nodelay mode, so a release that came on its own (every real
// click: the finger lifts a moment after the press) froze the dashboard until the next key.
static inline void cn_mouse_enable(void) {
    mousemask(ALL_MOUSE_EVENTS, NULL);
    mouseinterval(0);
}
static inline int cn_key_mouse(void) { return KEY_MOUSE; }
// The last mouse event: 1 a click of the first button, 2 wheel up, 3 wheel down, 0 anything
// else or none; its cell in row and column.
static inline int cn_mouse_read(int *row, int *column) {
    MEVENT event;
    if (getmouse(&event) != OK) return 0;
    *row = event.y;
    *column = event.x;
    if (event.bstate & (BUTTON1_PRESSED | BUTTON1_CLICKED | BUTTON1_DOUBLE_CLICKED | BUTTON1_TRIPLE_CLICKED)) return 1;
    if (event.bstate & BUTTON4_PRESSED) return 2;
#ifdef BUTTON5_PRESSED
    if (event.bstate & BUTTON5_PRESSED) return 3;
#endif
    return 0;
}

// Function keys are built by the KEY_F(n) macro, which is not imported.
static inline int cn_key_f(int n) { return KEY_F(n); }

// A screen on the process's own stdout/stdin. Unlike initscr, newterm returns NULL for an
// unusable terminal instead of exiting the process.
static inline SCREEN *cn_newterm(void) { return newterm(NULL, stdout, stdin); }

// Whether the terminal on stdout can be driven full-screen: TERM names a terminfo entry that
// has cursor addressing and can clear the screen (TERM=dumb or unset cannot). Asked before
// anything starts; it loads the entry without taking the terminal over. term.h is not
// included: its capability macros (lines, columns, ...) would clash with Swift names.
extern int setupterm(const char *name, int fd, int *error);
static inline int cn_terminal_is_usable(void) {
    int error = 0;
    if (setupterm(NULL, STDOUT_FILENO, &error) != 0) return 0;
    char *address = tigetstr("cup");
    char *clear = tigetstr("clear");
    return address != NULL && address != (char *)-1 && clear != NULL && clear != (char *)-1;
}

// Sets the attributes and color pair of the standard screen (wattrset is a macro).
static inline void cn_set_attributes(attr_t attributes, short pair) {
    wattr_set(stdscr, attributes, pair, NULL);
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
