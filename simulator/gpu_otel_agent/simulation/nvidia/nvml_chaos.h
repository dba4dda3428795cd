/*
 * Faults of the simulated NVML node: random chaos, targeted failures, and the node states
 * real drivers go through (driver reload, RESET_REQUIRED).  Included once by libnvml_sim.c,
 * after FN_COUNT and SIM_MAX_DEV exist and before the state layout (which embeds
 * sim_chaos_t).  The node daemon writes the configuration through simnode_chaos_* (below,
 * CHAOS_CONTROL part); every client process decides on its own calls.
 *
 * Reproducibility: a client's decision for the n-th call of function f on device d is a hash
 * of (seed, f, d, n), n counted per client process and restarted whenever the configuration
 * changes.  Same seed + same calls per function and device = same faults, whatever the thread
 * interleaving across devices.
 */
#ifndef NVML_CHAOS_H
#define NVML_CHAOS_H

#define CHAOS_CODES 16      /* codes drawn per function */
#define CHAOS_CODE_SLOTS 32 /* stats column of an nvmlReturn_t: its value, 999 (UNKNOWN) at 31 */
#define CHAOS_FAULTS 64     /* targeted faults at once */
#define CHAOS_FIELD_IDS 320 /* > NVML_FI_MAX (310 in NVML 13) */
#define CHAOS_ANY (-1)

typedef struct {
    int32_t active;
    int32_t fn;    /* FN_ index, CHAOS_ANY = every function */
    int32_t dev;   /* device index, CHAOS_ANY = every device (and device-less calls) */
    int32_t field; /* CHAOS_ANY: the whole call; else that field id of nvmlDeviceGetFieldValues */
    int32_t code;
    int32_t pad;
    int64_t remaining; /* calls left to fail; < 0 = until cleared */
    uint64_t hits;
} chaos_fault_t;

typedef struct {
    uint32_t gen;     /* bumped after every configuration change */
    uint32_t enabled; /* random chaos on */
    uint64_t seed;
    double rate;      /* P(error) per call */
    double slow_rate; /* P(slow) per call that did not fail */
    int32_t slow_ms;
    int32_t n_field_codes;
    int32_t field_codes[CHAOS_CODES]; /* per-field nvmlReturn drawn in nvmlDeviceGetFieldValues */
    uint8_t fn_on[FN_COUNT];
    uint8_t dev_on[SIM_MAX_DEV + 1]; /* last: calls without a device */
    int32_t n_codes[FN_COUNT];
    int32_t codes[FN_COUNT][CHAOS_CODES];
    chaos_fault_t fault[CHAOS_FAULTS];
    uint64_t injected[FN_COUNT][CHAOS_CODE_SLOTS];
    uint64_t slow[FN_COUNT];
    uint64_t field_injected[CHAOS_FIELD_IDS][CHAOS_CODE_SLOTS];
    /* Node states. */
    uint32_t driver_gen;                /* bumped by a driver reload */
    uint32_t reset_required[SIM_MAX_DEV];
    uint64_t device_up_us[SIM_MAX_DEV]; /* wall clock the driver last initialised each GPU */
} sim_chaos_t;

static inline int chaos_code_slot(int code) {
    if (code >= 0 && code < CHAOS_CODE_SLOTS - 1) return code;
    return CHAOS_CODE_SLOTS - 1; /* NVML_ERROR_UNKNOWN (999) and anything else */
}
static inline int chaos_slot_code(int slot) { return slot == CHAOS_CODE_SLOTS - 1 ? 999 : slot; }

static inline uint64_t chaos_mix(uint64_t x) { /* splitmix64 finaliser */
    x += 0x9E3779B97F4A7C15ULL;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
    return x ^ (x >> 31);
}
static inline double chaos_unit(uint64_t h) { return (double)(h >> 11) * (1.0 / 9007199254740992.0); }

/* ------------------------------------------------------------------------ */
/* Client side                                                              */
/* ------------------------------------------------------------------------ */
static uint32_t g_chaos_seen_gen = 0xFFFFFFFFu;
static uint64_t g_chaos_seq[FN_COUNT][SIM_MAX_DEV + 1];
static uint64_t g_chaos_field_seq[CHAOS_FIELD_IDS][SIM_MAX_DEV];
static pthread_mutex_t g_chaos_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t g_client_driver_gen; /* driver generation this client initialised under */

/* Restarts this process's call sequences when the node's configuration changed. */
static void chaos_sync(sim_chaos_t *c) {
    uint32_t gen = __atomic_load_n(&c->gen, __ATOMIC_ACQUIRE);
    if (__atomic_load_n(&g_chaos_seen_gen, __ATOMIC_ACQUIRE) == gen) return;
    pthread_mutex_lock(&g_chaos_lock);
    if (g_chaos_seen_gen != gen) {
        memset(g_chaos_seq, 0, sizeof g_chaos_seq);
        memset(g_chaos_field_seq, 0, sizeof g_chaos_field_seq);
        __atomic_store_n(&g_chaos_seen_gen, gen, __ATOMIC_RELEASE);
    }
    pthread_mutex_unlock(&g_chaos_lock);
}

/* A targeted fault matching (fn, dev, field) that still has calls to fail: its code, else 0. */
static int chaos_take_fault(sim_chaos_t *c, int fn, int dev, int field) {
    for (int i = 0; i < CHAOS_FAULTS; i++) {
        chaos_fault_t *f = &c->fault[i];
        if (!__atomic_load_n(&f->active, __ATOMIC_ACQUIRE)) continue;
        if ((f->fn != CHAOS_ANY && f->fn != fn) || (f->dev != CHAOS_ANY && f->dev != dev) || f->field != field) continue;
        int64_t rem = __atomic_load_n(&f->remaining, __ATOMIC_ACQUIRE);
        int take = 0;
        while (rem != 0 && !take) /* < 0: until cleared; else claim one of the calls left */
            take = rem < 0 || __atomic_compare_exchange_n(&f->remaining, &rem, rem - 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE);
        if (!take) continue;
        __atomic_fetch_add(&f->hits, 1, __ATOMIC_RELAXED);
        return f->code;
    }
    return 0;
}

/*
 * The fault for this call, or NVML_SUCCESS to answer normally (possibly after a slow delay).
 * dev < 0 for calls without a device.
 */
static nvmlReturn_t chaos_call(sim_chaos_t *c, int fn, int dev) {
    if (fn < 0 || fn >= FN_COUNT) return NVML_SUCCESS;
    int code = chaos_take_fault(c, fn, dev, CHAOS_ANY);
    if (code) {
        __atomic_fetch_add(&c->injected[fn][chaos_code_slot(code)], 1, __ATOMIC_RELAXED);
        return (nvmlReturn_t)code;
    }
    if (!__atomic_load_n(&c->enabled, __ATOMIC_ACQUIRE)) return NVML_SUCCESS;
    int col = dev >= 0 && dev < SIM_MAX_DEV ? dev : SIM_MAX_DEV;
    if (!c->fn_on[fn] || !c->dev_on[col]) return NVML_SUCCESS;
    chaos_sync(c);
    uint64_t n = __atomic_fetch_add(&g_chaos_seq[fn][col], 1, __ATOMIC_RELAXED);
    uint64_t h = chaos_mix(c->seed ^ chaos_mix(((uint64_t)fn << 40) ^ ((uint64_t)col << 32) ^ n));
    int nc = c->n_codes[fn];
    if (chaos_unit(h) < c->rate && nc > 0) {
        code = c->codes[fn][chaos_mix(h ^ 0xC0DEULL) % (uint64_t)nc];
        __atomic_fetch_add(&c->injected[fn][chaos_code_slot(code)], 1, __ATOMIC_RELAXED);
        return (nvmlReturn_t)code;
    }
    if (c->slow_ms > 0 && chaos_unit(chaos_mix(h ^ 0x510ULL)) < c->slow_rate) {
        __atomic_fetch_add(&c->slow[fn], 1, __ATOMIC_RELAXED);
        sleep_ms(c->slow_ms);
    }
    return NVML_SUCCESS;
}

/* A per-field nvmlReturn for field `field` of a nvmlDeviceGetFieldValues call, else SUCCESS. */
static nvmlReturn_t chaos_field(sim_chaos_t *c, int fn, int dev, unsigned field) {
    int fid = field < CHAOS_FIELD_IDS ? (int)field : CHAOS_FIELD_IDS - 1;
    int code = chaos_take_fault(c, fn, dev, (int)field);
    if (!code && __atomic_load_n(&c->enabled, __ATOMIC_ACQUIRE) && c->fn_on[fn] && dev >= 0 && dev < SIM_MAX_DEV &&
        c->dev_on[dev] && c->n_field_codes > 0) {
        chaos_sync(c);
        uint64_t n = __atomic_fetch_add(&g_chaos_field_seq[fid][dev], 1, __ATOMIC_RELAXED);
        uint64_t h = chaos_mix(c->seed ^ chaos_mix(0xF1E1D0000000000ULL ^ ((uint64_t)fid << 40) ^ ((uint64_t)dev << 32) ^ n));
        if (chaos_unit(h) < c->rate) code = c->field_codes[chaos_mix(h ^ 0xC0DEULL) % (uint64_t)c->n_field_codes];
    }
    if (!code) return NVML_SUCCESS;
    __atomic_fetch_add(&c->field_injected[fid][chaos_code_slot(code)], 1, __ATOMIC_RELAXED);
    return (nvmlReturn_t)code;
}

/* This client initialised before the last driver reload: its handles are gone. */
static inline int chaos_stale_client(sim_chaos_t *c) {
    return __atomic_load_n(&c->driver_gen, __ATOMIC_ACQUIRE) != g_client_driver_gen;
}

#endif
