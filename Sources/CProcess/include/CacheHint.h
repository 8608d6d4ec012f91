#ifndef JOBTOP_CACHE_HINT_H
#define JOBTOP_CACHE_HINT_H

#include <stddef.h>

// A hint to the CPU that memory at `address` will be read soon: it starts loading the
// `bytes` that follow into the cache and returns at once. No effect on what any program
// state holds (an address that is not mapped is ignored, never a fault), so a pure value
// type may call it. The scheduler core uses it for records it will touch in its next step
// (the next job to start, the next finished record to drop), which in a DAG are spread over
// the whole table, where a start in submission order is prefetched by the hardware.
static inline void jt_prefetch(const void *address, size_t bytes) {
    const char *p = (const char *)address;
    for (size_t offset = 0; offset < bytes; offset += 64) {
        __builtin_prefetch(p + offset, 0, 3);
    }
}

// Tells the CPU that the caller spins on a lock for a moment (a hint; no effect on what is
// computed): it lets a sibling hyperthread run and saves power while the holder finishes.
static inline void jt_spin_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

#endif
