/*
 * Control side of nvml_chaos.h: the simnode_chaos_* / simnode_* functions the node daemon
 * calls to configure faults, read their counts and play driver reloads and GPU resets.
 * Included once at the end of libnvml_sim.c (needs g_ctl, the reading table and bump()).
 */
#ifndef NVML_CHAOS_CTL_H
#define NVML_CHAOS_CTL_H

static sim_chaos_t *ctl_chaos(void) { return g_ctl ? &g_ctl->chaos : NULL; }

/* Random chaos parameters; takes effect (sequences restart) at simnode_chaos_commit. */
SIM_EXPORT int simnode_chaos_config(int enabled, unsigned long long seed, double rate, double slow_rate, int slow_ms) {
    sim_chaos_t *c = ctl_chaos();
    if (!c || !(rate >= 0 && rate <= 1) || !(slow_rate >= 0 && slow_rate <= 1) || slow_ms < 0) return -1;
    c->seed = seed; c->rate = rate; c->slow_rate = slow_rate; c->slow_ms = slow_ms;
    __atomic_store_n(&c->enabled, enabled ? 1u : 0u, __ATOMIC_RELEASE);
    return 0;
}
/* The codes drawn for function fn (FN_ index); n <= CHAOS_CODES. */
SIM_EXPORT int simnode_chaos_set_codes(int fn, const int *codes, int n) {
    sim_chaos_t *c = ctl_chaos();
    if (!c || fn < 0 || fn >= FN_COUNT || n < 0 || n > CHAOS_CODES) return -1;
    for (int i = 0; i < n; i++) c->codes[fn][i] = codes[i];
    c->n_codes[fn] = n;
    return 0;
}
SIM_EXPORT int simnode_chaos_set_field_codes(const int *codes, int n) {
    sim_chaos_t *c = ctl_chaos();
    if (!c || n < 0 || n > CHAOS_CODES) return -1;
    for (int i = 0; i < n; i++) c->field_codes[i] = codes[i];
    c->n_field_codes = n;
    return 0;
}
SIM_EXPORT int simnode_chaos_set_function(int fn, int on) {
    sim_chaos_t *c = ctl_chaos();
    if (!c || fn < 0 || fn >= FN_COUNT) return -1;
    c->fn_on[fn] = on ? 1 : 0;
    return 0;
}
/* dev = SIM_MAX_DEV: calls without a device (system calls, event waits). */
SIM_EXPORT int simnode_chaos_set_device(int dev, int on) {
    sim_chaos_t *c = ctl_chaos();
    if (!c || dev < 0 || dev > SIM_MAX_DEV) return -1;
    c->dev_on[dev] = on ? 1 : 0;
    return 0;
}
SIM_EXPORT int simnode_chaos_commit(void) {
    sim_chaos_t *c = ctl_chaos();
    if (!c) return -1;
    return (int)__atomic_add_fetch(&c->gen, 1, __ATOMIC_ACQ_REL);
}

/* A targeted fault: the next `count` calls (count < 0: every call until cleared). Returns its slot. */
SIM_EXPORT int simnode_chaos_fault_add(int fn, int dev, int field, int code, long long count) {
    sim_chaos_t *c = ctl_chaos();
    if (!c || fn < CHAOS_ANY || fn >= FN_COUNT || dev < CHAOS_ANY || dev >= SIM_MAX_DEV || code == 0) return -1;
    for (int i = 0; i < CHAOS_FAULTS; i++) {
        chaos_fault_t *f = &c->fault[i];
        int reuse = f->active && f->fn == fn && f->dev == dev && f->field == field; /* replace, not stack */
        if (f->active && !reuse && __atomic_load_n(&f->remaining, __ATOMIC_ACQUIRE) != 0) continue; /* spent: reusable */
        __atomic_store_n(&f->active, 0, __ATOMIC_RELEASE);
        f->fn = fn; f->dev = dev; f->field = field; f->code = code; f->hits = 0;
        __atomic_store_n(&f->remaining, (int64_t)count, __ATOMIC_RELEASE);
        __atomic_store_n(&f->active, 1, __ATOMIC_RELEASE);
        return i;
    }
    return -3;
}
/* Clears the faults matching (fn, dev, field); -2 in any of them matches everything. */
SIM_EXPORT int simnode_chaos_fault_clear(int fn, int dev, int field) {
    sim_chaos_t *c = ctl_chaos();
    if (!c) return -1;
    int n = 0;
    for (int i = 0; i < CHAOS_FAULTS; i++) {
        chaos_fault_t *f = &c->fault[i];
        if (!f->active || (fn != -2 && f->fn != fn) || (dev != -2 && f->dev != dev) || (field != -2 && f->field != field)) continue;
        __atomic_store_n(&f->active, 0, __ATOMIC_RELEASE);
        n++;
    }
    return n;
}
/* Slot i: out = {active, fn, dev, field, code, remaining, hits}. */
SIM_EXPORT int simnode_chaos_fault_get(int i, long long *out) {
    sim_chaos_t *c = ctl_chaos();
    if (!c || i < 0 || i >= CHAOS_FAULTS || !out) return -1;
    chaos_fault_t *f = &c->fault[i];
    out[0] = f->active; out[1] = f->fn; out[2] = f->dev; out[3] = f->field; out[4] = f->code;
    out[5] = (long long)__atomic_load_n(&f->remaining, __ATOMIC_ACQUIRE);
    out[6] = (long long)__atomic_load_n(&f->hits, __ATOMIC_RELAXED);
    return 0;
}
SIM_EXPORT int simnode_chaos_fault_slots(void) { return CHAOS_FAULTS; }
SIM_EXPORT int simnode_chaos_code_slots(void) { return CHAOS_CODE_SLOTS; }
SIM_EXPORT int simnode_chaos_field_ids(void) { return CHAOS_FIELD_IDS; }
SIM_EXPORT int simnode_chaos_slot_code(int slot) { return chaos_slot_code(slot); }
SIM_EXPORT unsigned long long simnode_chaos_injected(int fn, int slot) {
    sim_chaos_t *c = ctl_chaos();
    if (!c || fn < 0 || fn >= FN_COUNT || slot < 0 || slot >= CHAOS_CODE_SLOTS) return 0;
    return __atomic_load_n(&c->injected[fn][slot], __ATOMIC_RELAXED);
}
SIM_EXPORT unsigned long long simnode_chaos_slow(int fn) {
    sim_chaos_t *c = ctl_chaos();
    if (!c || fn < 0 || fn >= FN_COUNT) return 0;
    return __atomic_load_n(&c->slow[fn], __ATOMIC_RELAXED);
}
SIM_EXPORT unsigned long long simnode_chaos_field_injected(int field, int slot) {
    sim_chaos_t *c = ctl_chaos();
    if (!c || field < 0 || field >= CHAOS_FIELD_IDS || slot < 0 || slot >= CHAOS_CODE_SLOTS) return 0;
    return __atomic_load_n(&c->field_injected[field][slot], __ATOMIC_RELAXED);
}

/* ------------------------------------------------------------------------ */
/* Node states                                                              */
/* ------------------------------------------------------------------------ */
/* What the driver keeps only while loaded (nvml.h: energy "since the driver was last
 * reloaded", volatile ECC "reset each time the driver loads"), and the driver's PCIe and
 * NVLink byte counters.  Aggregate ECC, retired pages and remapped rows live in the InfoROM. */
static void reset_volatile_counters(sim_dev_t *d) {
    static const int rids[] = {R_energy_mj, R_ecc_sbe_volatile, R_ecc_dbe_volatile, R_pcie_tx_bytes,
                               R_pcie_rx_bytes, R_nvlink_tx_kib, R_nvlink_rx_kib};
    double zero = 0.0;
    for (size_t i = 0; i < sizeof rids / sizeof rids[0]; i++) __atomic_store(&d->val[rids[i]], &zero, __ATOMIC_RELEASE);
}

/* GPU reset (nvidia-smi -r): volatile counters restart, uptime restarts, RESET_REQUIRED clears. */
SIM_EXPORT int simnode_gpu_reset(int dev) {
    sim_dev_t *d = ctl_dev(dev);
    if (!d) return -1;
    reset_volatile_counters(d);
    __atomic_store_n(&g_ctl->chaos.device_up_us[dev], now_us(), __ATOMIC_RELEASE);
    __atomic_store_n(&g_ctl->chaos.reset_required[dev], 0, __ATOMIC_RELEASE);
    return 0;
}
SIM_EXPORT int simnode_set_reset_required(int dev, int on) {
    if (!ctl_dev(dev)) return -1;
    __atomic_store_n(&g_ctl->chaos.reset_required[dev], on ? 1u : 0u, __ATOMIC_RELEASE);
    return 0;
}
/* Driver reload: every client initialised before it answers UNINITIALIZED until it calls
 * nvmlInit again; every GPU's volatile counters and uptime restart. Returns the new generation. */
SIM_EXPORT long long simnode_driver_reload(void) {
    if (!g_ctl) return -1;
    uint64_t now = now_us();
    for (unsigned i = 0; i < g_ctl->n_devices; i++) {
        reset_volatile_counters(&g_ctl->dev[i]);
        __atomic_store_n(&g_ctl->chaos.device_up_us[i], now, __ATOMIC_RELEASE);
        __atomic_store_n(&g_ctl->chaos.reset_required[i], 0, __ATOMIC_RELEASE);
    }
    return (long long)__atomic_add_fetch(&g_ctl->chaos.driver_gen, 1, __ATOMIC_ACQ_REL);
}
SIM_EXPORT long long simnode_driver_generation(void) {
    return g_ctl ? (long long)__atomic_load_n(&g_ctl->chaos.driver_gen, __ATOMIC_ACQUIRE) : -1;
}
SIM_EXPORT int simnode_init_uptime(void) {
    if (!g_ctl) return -1;
    uint64_t now = now_us();
    for (unsigned i = 0; i < g_ctl->n_devices; i++) g_ctl->chaos.device_up_us[i] = now;
    return 0;
}

#endif
