/*
 * The state machinery shared by the simulated GPU libraries, written once against the
 * vendor's own state layout (which stays in the vendor's source: it is that library's ABI
 * with its node daemon).  Include it once, after simcore.h and after the vendor defined:
 *
 *   SIMCORE_STATE_T, SIMCORE_DEV_T, SIMCORE_EVENT_T  the state file, a device, a ring entry
 *   SIMCORE_MAGIC, SIMCORE_LAYOUT_VERSION           what map_state checks in a state file
 *   SIMCORE_MAX_DEV, SIMCORE_MAX_PROC, SIMCORE_RING  table sizes of the layout
 *   SIMCORE_FN_SLOTS                                rows of the calls[][] counter table
 *   SIMCORE_NA                                      the per-reading "not available" field
 *   SIMCORE_CTL(name)                               the exported name of control function
 *                                                   `name` (simnode_name, simamd_name)
 *   R_COUNT, g_reading_names                        the reading table
 *   g_handles                                       the array of device handles
 *
 * The layout must have: magic, layout_version, n_devices, proc_gen, ev_futex, ev_lock,
 * ev_seq, ring[], dev[], proc[] (with pid and dev, -1 = free), calls[][MAX_DEV + 1];
 * a device: lost, hang_ms, val[], SIMCORE_NA[], fn_unsup[]; an event: seq, dev.
 */
#ifndef SIMCORE_STATE_H
#define SIMCORE_STATE_H

#define SIMCORE_CAT_(a, b) a##b
#define SIMCORE_CAT(a, b) SIMCORE_CAT_(a, b)

static SIMCORE_STATE_T *g_st = NULL;  /* the client side: what this process's API calls read */
static int g_init_count = 0;
static pthread_mutex_t g_init_lock = PTHREAD_MUTEX_INITIALIZER;
static SIMCORE_STATE_T *g_ctl = NULL; /* the control side: what the node daemon writes */

static SIMCORE_STATE_T *map_state(const char *path, int create, unsigned n_devices) {
    int fd = open(path, create ? (O_RDWR | O_CREAT | O_TRUNC) : O_RDWR, 0666);
    if (fd < 0) return NULL;
    if (create) {
        fchmod(fd, 0666);
        if (ftruncate(fd, (off_t)sizeof(SIMCORE_STATE_T)) != 0) { close(fd); return NULL; }
    } else {
        struct stat sb;
        if (fstat(fd, &sb) != 0 || (size_t)sb.st_size < sizeof(SIMCORE_STATE_T)) { close(fd); return NULL; }
    }
    void *p = mmap(NULL, sizeof(SIMCORE_STATE_T), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return NULL;
    SIMCORE_STATE_T *st = (SIMCORE_STATE_T *)p;
    if (create) {
        memset(st, 0, sizeof(*st));
        st->layout_version = SIMCORE_LAYOUT_VERSION;
        st->n_devices = n_devices;
        for (int i = 0; i < SIMCORE_MAX_PROC; i++) st->proc[i].dev = -1;
        __atomic_store_n(&st->magic, SIMCORE_MAGIC, __ATOMIC_RELEASE);
    } else if (__atomic_load_n(&st->magic, __ATOMIC_ACQUIRE) != SIMCORE_MAGIC ||
               st->layout_version != SIMCORE_LAYOUT_VERSION) {
        munmap(p, sizeof(SIMCORE_STATE_T));
        return NULL;
    }
    return st;
}

/* ------------------------------------------------------------------------ */
/* Client side: the prologue of every API call                              */
/* ------------------------------------------------------------------------ */
static inline void count_call(int fn, int dev) {
    if (!g_st || fn < 0 || fn >= SIMCORE_FN_SLOTS) return;
    if (dev >= 0 && dev < SIMCORE_MAX_DEV) __atomic_fetch_add(&g_st->calls[fn][dev], 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(&g_st->calls[fn][SIMCORE_MAX_DEV], 1, __ATOMIC_RELAXED);
}

/* The device index of a handle this library gave out, else -1. */
static inline int handle_index(const void *h) {
    uintptr_t p = (uintptr_t)h, b = (uintptr_t)&g_handles[0];
    if (!h || p < b || p >= b + sizeof(g_handles) || (p - b) % sizeof(g_handles[0])) return -1;
    int idx = (int)((p - b) / sizeof(g_handles[0]));
    if (!g_st || (unsigned)idx >= g_st->n_devices) return -1;
    return idx;
}

/* Blocks while the device hangs; re-checks every 20 ms so clearing releases. */
static void wait_hang(SIMCORE_DEV_T *d) {
    int h = __atomic_load_n(&d->hang_ms, __ATOMIC_ACQUIRE);
    if (h <= 0) return;
    uint64_t start = mono_ms();
    for (;;) {
        h = __atomic_load_n(&d->hang_ms, __ATOMIC_ACQUIRE);
        if (h <= 0) return;
        uint64_t el = mono_ms() - start;
        if (el >= (uint64_t)h) return;
        long rem = (long)((uint64_t)h - el);
        sleep_ms(rem < 20 ? rem : 20);
    }
}

/* What a per-device call finds; each library maps it to its own status codes. */
typedef enum { SIMCORE_OK, SIMCORE_UNINIT, SIMCORE_BAD_HANDLE, SIMCORE_LOST, SIMCORE_FN_UNSUP } simcore_enter_t;

/* Counts the call, then checks init, the handle, a lost device (before and after a hang). */
static simcore_enter_t simcore_dev_enter(int fn, const void *h, SIMCORE_DEV_T **out) {
    int idx = handle_index(h);
    count_call(fn, idx);
    if (!g_st || g_init_count <= 0) return SIMCORE_UNINIT;
    if (idx < 0) return SIMCORE_BAD_HANDLE;
    SIMCORE_DEV_T *d = &g_st->dev[idx];
    if (__atomic_load_n(&d->lost, __ATOMIC_ACQUIRE)) return SIMCORE_LOST;
    wait_hang(d);
    if (__atomic_load_n(&d->lost, __ATOMIC_ACQUIRE)) return SIMCORE_LOST;
    if (d->fn_unsup[fn]) return SIMCORE_FN_UNSUP;
    *out = d;
    return SIMCORE_OK;
}

/* Event ring, reader: the first sequence number after `last` still in the ring. */
static inline uint64_t ring_first(uint64_t last, uint64_t cur) {
    return cur > last + SIMCORE_RING ? cur - SIMCORE_RING : last; /* overrun: older events are gone */
}

/* Advances *s towards cur; the next complete entry, or NULL once *s reaches cur. */
static const SIMCORE_EVENT_T *ring_next(uint64_t *s, uint64_t cur) {
    while (*s < cur) {
        uint64_t n = ++*s;
        const SIMCORE_EVENT_T *e = &g_st->ring[n % SIMCORE_RING];
        if (__atomic_load_n(&e->seq, __ATOMIC_ACQUIRE) == n) return e;
    }
    return NULL;
}

/* ------------------------------------------------------------------------ */
/* Control side (the node daemon)                                           */
/* ------------------------------------------------------------------------ */
static SIMCORE_DEV_T *ctl_dev(int dev) {
    if (!g_ctl || dev < 0 || (unsigned)dev >= g_ctl->n_devices) return NULL;
    return &g_ctl->dev[dev];
}

static void bump(SIMCORE_DEV_T *d, int rid, double by) {
    double v = d->val[rid] + by;
    __atomic_store(&d->val[rid], &v, __ATOMIC_RELEASE);
}

/* Event ring, writer: claims the next entry (invalid until published) under the ring lock. */
static SIMCORE_EVENT_T *ring_claim(int dev, uint64_t *seq) {
    while (__atomic_exchange_n(&g_ctl->ev_lock, 1, __ATOMIC_ACQUIRE)) sched_yield();
    uint64_t s = g_ctl->ev_seq + 1;
    SIMCORE_EVENT_T *e = &g_ctl->ring[s % SIMCORE_RING];
    __atomic_store_n(&e->seq, 0, __ATOMIC_RELEASE);
    e->dev = dev;
    *seq = s;
    return e;
}

/* Makes the claimed entry visible, releases the lock and wakes every waiting reader. */
static long long ring_publish(SIMCORE_EVENT_T *e, uint64_t s) {
    __atomic_store_n(&e->seq, s, __ATOMIC_RELEASE);
    __atomic_store_n(&g_ctl->ev_seq, s, __ATOMIC_RELEASE);
    __atomic_store_n(&g_ctl->ev_futex, (uint32_t)s, __ATOMIC_RELEASE);
    __atomic_store_n(&g_ctl->ev_lock, 0, __ATOMIC_RELEASE);
    futex_wake_all(&g_ctl->ev_futex);
    return (long long)s;
}

/* The process table is a seqlock: proc_gen is odd while the daemon writes it. */
static void proc_write_begin(void) { __atomic_fetch_add(&g_ctl->proc_gen, 1, __ATOMIC_ACQ_REL); }
static void proc_write_end(void) { __atomic_fetch_add(&g_ctl->proc_gen, 1, __ATOMIC_ACQ_REL); }

/* The slot of (pid, dev), else the first free one (*existing = 0), else -1. */
static int proc_slot(int dev, uint32_t pid, int *existing) {
    int slot = -1;
    *existing = 0;
    for (int i = 0; i < SIMCORE_MAX_PROC; i++) {
        if (g_ctl->proc[i].dev == dev && g_ctl->proc[i].pid == pid) { *existing = 1; return i; }
        if (slot < 0 && g_ctl->proc[i].dev < 0) slot = i;
    }
    return slot;
}

SIM_EXPORT int SIMCORE_CTL(max_processes)(void) { return SIMCORE_MAX_PROC; }
SIM_EXPORT int SIMCORE_CTL(reading_count)(void) { return R_COUNT; }
SIM_EXPORT const char *SIMCORE_CTL(reading_name)(int i) { return i >= 0 && i < R_COUNT ? g_reading_names[i] : NULL; }

SIM_EXPORT int SIMCORE_CTL(open)(const char *path) {
    g_ctl = map_state(path, 0, 0);
    return g_ctl ? (int)g_ctl->n_devices : -2;
}
SIM_EXPORT int SIMCORE_CTL(set_reading)(int dev, int rid, double value) {
    SIMCORE_DEV_T *d = ctl_dev(dev);
    if (!d || rid < 0 || rid >= R_COUNT || !isfinite(value)) return -1;
    __atomic_store(&d->val[rid], &value, __ATOMIC_RELEASE);
    __atomic_store_n(&d->SIMCORE_NA[rid], 0, __ATOMIC_RELEASE);
    return 0;
}
SIM_EXPORT double SIMCORE_CTL(get_reading)(int dev, int rid) {
    SIMCORE_DEV_T *d = ctl_dev(dev);
    if (!d || rid < 0 || rid >= R_COUNT) return NAN;
    return d->SIMCORE_NA[rid] ? NAN : d->val[rid];
}
SIM_EXPORT int SIMCORE_CTL(set_unsupported)(int dev, int rid, int unsupported) {
    SIMCORE_DEV_T *d = ctl_dev(dev);
    if (!d || rid < 0 || rid >= R_COUNT) return -1;
    __atomic_store_n(&d->SIMCORE_NA[rid], unsupported ? 1 : 0, __ATOMIC_RELEASE);
    return 0;
}
SIM_EXPORT int SIMCORE_CTL(set_function_unsupported)(int dev, int fid, int unsupported) {
    SIMCORE_DEV_T *d = ctl_dev(dev);
    if (!d || fid < 0 || fid >= SIMCORE_FN_SLOTS) return -1;
    __atomic_store_n(&d->fn_unsup[fid], unsupported ? 1 : 0, __ATOMIC_RELEASE);
    return 0;
}
SIM_EXPORT int SIMCORE_CTL(set_lost)(int dev, int lost) {
    SIMCORE_DEV_T *d = ctl_dev(dev);
    if (!d) return -1;
    __atomic_store_n(&d->lost, lost ? 1 : 0, __ATOMIC_RELEASE);
    return 0;
}
SIM_EXPORT int SIMCORE_CTL(set_hang_ms)(int dev, int ms) {
    SIMCORE_DEV_T *d = ctl_dev(dev);
    if (!d || ms < 0) return -1;
    __atomic_store_n(&d->hang_ms, ms, __ATOMIC_RELEASE);
    return 0;
}
SIM_EXPORT int SIMCORE_CTL(get_lost)(int dev) { SIMCORE_DEV_T *d = ctl_dev(dev); return d ? d->lost : -1; }

/* Removes pid from one device, or from all devices when dev < 0.  Returns how many. */
SIM_EXPORT int SIMCORE_CTL(proc_rm)(int dev, unsigned int pid) {
    if (!g_ctl) return -1;
    int n = 0;
    proc_write_begin();
    for (int i = 0; i < SIMCORE_MAX_PROC; i++) {
        if (g_ctl->proc[i].dev >= 0 && g_ctl->proc[i].pid == pid && (dev < 0 || g_ctl->proc[i].dev == dev)) {
            g_ctl->proc[i].dev = -1;
            g_ctl->proc[i].pid = 0;
            n++;
        }
    }
    proc_write_end();
    return n;
}
SIM_EXPORT int SIMCORE_CTL(proc_count)(void) {
    if (!g_ctl) return -1;
    int n = 0;
    for (int i = 0; i < SIMCORE_MAX_PROC; i++) n += g_ctl->proc[i].dev >= 0;
    return n;
}

SIM_EXPORT unsigned long long SIMCORE_CTL(call_count)(int fid, int dev) {
    if (!g_ctl || fid < 0 || fid >= SIMCORE_FN_SLOTS) return 0;
    if (dev < 0) return __atomic_load_n(&g_ctl->calls[fid][SIMCORE_MAX_DEV], __ATOMIC_RELAXED);
    if (dev >= SIMCORE_MAX_DEV) return 0;
    return __atomic_load_n(&g_ctl->calls[fid][dev], __ATOMIC_RELAXED);
}
SIM_EXPORT int SIMCORE_CTL(device_count)(void) { return g_ctl ? (int)g_ctl->n_devices : -1; }
SIM_EXPORT unsigned long long SIMCORE_CTL(event_seq)(void) {
    return g_ctl ? __atomic_load_n(&g_ctl->ev_seq, __ATOMIC_ACQUIRE) : 0;
}

#endif
