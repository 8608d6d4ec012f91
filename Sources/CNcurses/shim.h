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

#endif
