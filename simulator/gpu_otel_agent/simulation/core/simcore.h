/*
 * The vendor-neutral base of the simulated GPU libraries (libnvml_sim.c, libamd_smi_sim.c):
 * the system headers both use, the export attribute, clocks and the shared futex calls.
 * Include it first, right after `#define _GNU_SOURCE` (and a vendor header that must come
 * before the system ones).  The state machinery that works on the vendor's own layout is
 * in simcore_state.h, included once the vendor has declared that layout.
 */
#ifndef SIMCORE_H
#define SIMCORE_H

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SIM_EXPORT __attribute__((visibility("default")))

static inline uint64_t now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}

static inline uint64_t mono_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000ULL + (uint64_t)ts.tv_nsec / 1000000ULL;
}

static inline void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR) {
    }
}

/* The state file is shared between processes, so these are the shared futex ops, not _PRIVATE. */
static inline long futex_wait(uint32_t *addr, uint32_t expected, long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    return syscall(SYS_futex, addr, FUTEX_WAIT, expected, &ts, NULL, 0);
}

static inline void futex_wake_all(uint32_t *addr) {
    syscall(SYS_futex, addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

#endif
