/*
 * MIG for the simulated NVML: MIG handles, MIG-mode rules, the MIG entry points and their
 * control functions.  Included at the end of libnvml_sim.c (it uses that file's state,
 * prologue macros and helpers); the shared types are in nvml_sim_mig_types.h.
 *
 * Semantics follow nvml.h:
 *  - nvmlDeviceGetMigMode reports the mode; nvmlDeviceGetMaxMigDeviceCount is zero unless MIG
 *    is enabled; nvmlDeviceGetMigDeviceHandleByIndex answers the MIG device at that index, and
 *    NOT_FOUND ("if no valid MIG device was found at index") for an empty index below the max
 *    count -- indices may have holes, as go-nvlib's VisitMigDevices expects (it walks every
 *    index up to the max count).  "Handles may be reused and their properties can change": a
 *    handle names a slot; a destroyed instance's handle answers INVALID_ARGUMENT until the slot
 *    is used again.
 *  - A MIG device is a compute instance; a GPU instance may hold several (each its own handle,
 *    MIG- UUID and compute instance id), which share the GPU instance's memory.
 *  - On a MIG handle, the calls NVML serves per instance read the instance (name, MIG- UUID,
 *    memory, attributes, running processes of its compute instance, PCI info, its MIG device
 *    index from nvmlDeviceGetIndex, compute mode, the parent's uptime, GPM samples); every
 *    other call is NOT_SUPPORTED (physical readings stay with the parent; events cannot be
 *    registered on a MIG handle).
 *  - On a MIG-enabled parent, device utilization, encoder/decoder/JPEG/OFA utilization,
 *    process utilization, the core count, samples, remapped rows and volatile ECC counters
 *    (calls and fields) are NOT_SUPPORTED (nvml.h's "On MIG-enabled GPUs" notes; nvidia-smi
 *    prints "On" in the volatile-ECC column of a MIG-enabled GPU where others print a count:
 *    mig-parted#31, A100-SXM4-80GB; bigstack-oss/cubecos#312, RTX PRO 6000);
 *    the parent's process lists aggregate every instance's processes, each with its
 *    gpuInstanceId / computeInstanceId.  Per instance, nvmlDeviceGetMemoryErrorCounter serves
 *    "non-DRAM uncorrectable volatile errors" on the MIG handle.
 *  - GPM per GPU instance through nvmlGpmMigSampleGet(parent, gpuInstanceId, sample) (its
 *    compute instances' activity, weighted by their slices), per compute instance through
 *    nvmlGpmSampleGet on the MIG handle.
 *  - An XID attributable to an instance carries its gpuInstanceId / computeInstanceId in the
 *    event data; a reconfiguration is announced with nvmlEventMigConfigChange.
 */

static struct nvmlDevice_st g_mig_handles[SIM_MAX_DEV][SIM_MAX_MIG];

/* Functions a MIG handle answers; every other one is NOT_SUPPORTED on it. */
static const int g_mig_served[] = {
    FN_nvmlDeviceGetName, FN_nvmlDeviceGetUUID, FN_nvmlDeviceGetMemoryInfo,
    FN_nvmlDeviceGetMemoryInfo_v2, FN_nvmlDeviceGetAttributes_v2, FN_nvmlDeviceIsMigDeviceHandle,
    FN_nvmlDeviceGetGpuInstanceId, FN_nvmlDeviceGetComputeInstanceId,
    FN_nvmlDeviceGetDeviceHandleFromMigDeviceHandle, FN_nvmlDeviceGetPciInfo_v3,
    FN_nvmlDeviceGetPciInfo_v2, FN_nvmlDeviceGetPciInfo, FN_nvmlDeviceGetPciInfoExt,
    FN_nvmlDeviceGetCudaComputeCapability, FN_nvmlDeviceGetArchitecture, FN_nvmlDeviceGetBrand,
    FN_nvmlDeviceGetComputeRunningProcesses_v3, FN_nvmlDeviceGetComputeRunningProcesses_v2,
    FN_nvmlDeviceGetComputeRunningProcesses, FN_nvmlDeviceGetGraphicsRunningProcesses_v3,
    FN_nvmlDeviceGetGraphicsRunningProcesses_v2, FN_nvmlDeviceGetGraphicsRunningProcesses,
    FN_nvmlDeviceGetMPSComputeRunningProcesses_v3, FN_nvmlDeviceGetMPSComputeRunningProcesses_v2,
    FN_nvmlDeviceGetMPSComputeRunningProcesses, FN_nvmlDeviceGetRunningProcessDetailList,
    FN_nvmlDeviceGetBAR1MemoryInfo, /* nvidia-smi's MIG table shows BAR1 per MIG device */
    FN_nvmlDeviceGetIndex,           /* "returns indices that can be passed to ...ByIndex" */
    FN_nvmlDeviceGetComputeMode,     /* "If MIG is enabled on a GPU, device must be MIG device handle" */
    FN_nvmlDeviceGetGpuUptime_v1,    /* "For MIG device handles, the parent GPU uptime is returned" */
    FN_nvmlGpmSampleGet,             /* "This API supports the device handle and MIG device handle" */
    FN_nvmlGpmQueryDeviceSupport,
    FN_nvmlDeviceGetMemoryErrorCounter, /* per instance: non-DRAM uncorrectable volatile only */
};

/* Functions a MIG-enabled parent does not serve (nvml.h's "On MIG-enabled GPUs" notes). */
static const int g_mig_parent_unsupported[] = {
    FN_nvmlDeviceGetUtilizationRates, FN_nvmlDeviceGetEncoderUtilization,
    FN_nvmlDeviceGetDecoderUtilization, FN_nvmlDeviceGetJpgUtilization,
    FN_nvmlDeviceGetOfaUtilization, FN_nvmlDeviceGetProcessUtilization,
    FN_nvmlDeviceGetNumGpuCores, FN_nvmlDeviceGetSamples,
    FN_nvmlDeviceGetRemappedRows,  /* "NOT_SUPPORTED If MIG is enabled" */
    /* Not the compute mode: nvml.h says "If MIG is enabled on a GPU, device must be MIG device
     * handle", but nvidia-smi on a MIG-enabled A100-SXM4-80GB (driver 545.23.08) prints
     * "Default" for the parent (github.com/NVIDIA/mig-parted/issues/31): a capture beats it. */
};

/* Fields a MIG-enabled parent does not serve: the volatile ECC counters ("Querying volatile
 * errors using device handles is currently not supported") and remapped rows ("NOT_SUPPORTED
 * If MIG is enabled"), the same data as the calls above. */
static const unsigned g_mig_parent_fields[] = {
    NVML_FI_DEV_ECC_SBE_VOL_TOTAL, NVML_FI_DEV_ECC_DBE_VOL_TOTAL,
    NVML_FI_DEV_ECC_SBE_VOL_L1, NVML_FI_DEV_ECC_DBE_VOL_L1, NVML_FI_DEV_ECC_SBE_VOL_L2,
    NVML_FI_DEV_ECC_DBE_VOL_L2, NVML_FI_DEV_ECC_SBE_VOL_DEV, NVML_FI_DEV_ECC_DBE_VOL_DEV,
    NVML_FI_DEV_ECC_SBE_VOL_REG, NVML_FI_DEV_ECC_DBE_VOL_REG, NVML_FI_DEV_ECC_SBE_VOL_TEX,
    NVML_FI_DEV_ECC_DBE_VOL_TEX, NVML_FI_DEV_ECC_DBE_VOL_CBU,
    NVML_FI_DEV_REMAPPED_COR, NVML_FI_DEV_REMAPPED_UNC, NVML_FI_DEV_REMAPPED_PENDING,
    NVML_FI_DEV_REMAPPED_FAILURE,
};

static int mig_handle(nvmlDevice_t device, int *parent, int *slot) {
    uintptr_t p = (uintptr_t)device, b = (uintptr_t)&g_mig_handles[0][0];
    if (!device || p < b || p >= b + sizeof(g_mig_handles) || (p - b) % sizeof(g_mig_handles[0][0])) return 0;
    int flat = (int)((p - b) / sizeof(g_mig_handles[0][0]));
    *parent = flat / SIM_MAX_MIG;
    *slot = flat % SIM_MAX_MIG;
    return 1;
}

static nvmlReturn_t mig_enter(int fn, int parent, int slot, sim_dev_t **out) {
    count_call(fn, parent);  /* counted under the physical GPU, as its thread pays for it */
    if (!g_st || g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    if ((unsigned)parent >= g_st->n_devices) return NVML_ERROR_INVALID_ARGUMENT;
    sim_dev_t *pd = &g_st->dev[parent];
    if (__atomic_load_n(&pd->lost, __ATOMIC_ACQUIRE)) return NVML_ERROR_GPU_IS_LOST;
    wait_hang(pd);
    if (__atomic_load_n(&pd->lost, __ATOMIC_ACQUIRE)) return NVML_ERROR_GPU_IS_LOST;
    sim_mig_dev_t *md = &g_st->mig[parent];
    sim_mig_t *m = &md->inst[slot];
    if (!__atomic_load_n(&md->enabled, __ATOMIC_ACQUIRE) || !__atomic_load_n(&m->active, __ATOMIC_ACQUIRE))
        return NVML_ERROR_INVALID_ARGUMENT; /* destroyed: the handle must be requested again */
    if (m->dev.fn_unsup[fn]) return NVML_ERROR_NOT_SUPPORTED;
    *out = &m->dev;
    return NVML_SUCCESS;
}

static nvmlReturn_t mig_parent_rule(int fn, const sim_dev_t *d) {
    int idx = (int)(d - g_st->dev);
    if (!__atomic_load_n(&g_st->mig[idx].enabled, __ATOMIC_ACQUIRE)) return NVML_SUCCESS;
    for (size_t i = 0; i < sizeof g_mig_parent_unsupported / sizeof g_mig_parent_unsupported[0]; i++)
        if (g_mig_parent_unsupported[i] == fn) return NVML_ERROR_NOT_SUPPORTED;
    return NVML_SUCCESS;
}

/* The physical device index of d (a GPU's or an instance's), and its GPU and compute
 * instance (or NONE). */
static int dev_place_ci(const sim_dev_t *d, unsigned *gi, unsigned *ci) {
    uintptr_t p = (uintptr_t)d, b = (uintptr_t)&g_st->dev[0];
    *gi = *ci = SIM_MIG_NONE;
    if (p >= b && p < b + sizeof(g_st->dev)) return (int)(d - g_st->dev);
    for (unsigned i = 0; i < g_st->n_devices; i++)
        for (int s = 0; s < SIM_MAX_MIG; s++)
            if (&g_st->mig[i].inst[s].dev == d) {
                *gi = g_st->mig[i].inst[s].gi_id; *ci = g_st->mig[i].inst[s].ci_id;
                return (int)i;
            }
    return -1;
}
static int dev_place(const sim_dev_t *d, unsigned *gi) {
    unsigned ci;
    return dev_place_ci(d, gi, &ci);
}

/* d is a physical GPU in MIG mode. */
static int mig_parent_on(const sim_dev_t *d) {
    uintptr_t p = (uintptr_t)d, b = (uintptr_t)&g_st->dev[0];
    if (p < b || p >= b + sizeof(g_st->dev)) return 0;
    return __atomic_load_n(&g_st->mig[d - g_st->dev].enabled, __ATOMIC_ACQUIRE) != 0;
}

static int mig_field_unsupported(const sim_dev_t *d, unsigned field) {
    if (!mig_parent_on(d)) return 0;
    for (size_t i = 0; i < sizeof g_mig_parent_fields / sizeof g_mig_parent_fields[0]; i++)
        if (g_mig_parent_fields[i] == field) return 1;
    return 0;
}

static sim_mig_t *mig_of(const sim_dev_t *d, int *parent, int *slot) {
    for (unsigned i = 0; i < g_st->n_devices; i++)
        for (int s = 0; s < SIM_MAX_MIG; s++)
            if (&g_st->mig[i].inst[s].dev == d) { *parent = (int)i; *slot = s; return &g_st->mig[i].inst[s]; }
    return NULL;
}

static nvmlReturn_t mig_by_uuid(const char *uuid, nvmlDevice_t *device) {
    for (unsigned i = 0; i < g_st->n_devices; i++) {
        if (!g_st->mig[i].enabled) continue;
        for (int s = 0; s < SIM_MAX_MIG; s++) {
            sim_mig_t *m = &g_st->mig[i].inst[s];
            if (m->active && strncmp(m->dev.uuid, uuid, SIM_STR) == 0) { *device = &g_mig_handles[i][s]; return NVML_SUCCESS; }
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

/* d is a MIG device: its MIG device index (its slot). */
static int mig_index_of(const sim_dev_t *d, unsigned *index) {
    int parent, slot;
    if (!mig_of(d, &parent, &slot)) return 0;
    *index = (unsigned)slot;
    return 1;
}

static void mig_attributes(const sim_dev_t *d, nvmlDeviceAttributes_t *a) {
    int parent, slot;
    sim_mig_t *m = mig_of(d, &parent, &slot);
    if (!m) return;
    a->gpuInstanceSliceCount = m->slices;
    a->computeInstanceSliceCount = m->ci_slices;
    a->sharedCopyEngineCount = m->slices; a->sharedDecoderCount = m->slices / 2;
    a->sharedJpegCount = m->slices / 3; a->sharedOfaCount = m->slices == 7 ? 1 : 0;
}

/* ------------------------------------------------------------------------ */
/* MIG entry points                                                         */
/* ------------------------------------------------------------------------ */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *cur, unsigned int *pend) {
    DEV_ENTER(nvmlDeviceGetMigMode); NEED(cur); NEED(pend); SUP(mig_mode);
    int on = __atomic_load_n(&g_st->mig[d - g_st->dev].enabled, __ATOMIC_ACQUIRE);
    *cur = *pend = on ? NVML_DEVICE_MIG_ENABLE : NVML_DEVICE_MIG_DISABLE;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *is) {
    DEV_ENTER(nvmlDeviceIsMigDeviceHandle); NEED(is);
    unsigned gi;
    dev_place(d, &gi);
    *is = gi != SIM_MIG_NONE;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *c) {
    DEV_ENTER(nvmlDeviceGetMaxMigDeviceCount); NEED(c); SUP(mig_mode);
    *c = __atomic_load_n(&g_st->mig[d - g_st->dev].enabled, __ATOMIC_ACQUIRE) ? SIM_MAX_MIG : 0;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index, nvmlDevice_t *mig) {
    DEV_ENTER(nvmlDeviceGetMigDeviceHandleByIndex); NEED(mig); SUP(mig_mode);
    int idx = (int)(d - g_st->dev);
    sim_mig_dev_t *md = &g_st->mig[idx];
    if (!__atomic_load_n(&md->enabled, __ATOMIC_ACQUIRE)) return NVML_ERROR_NOT_FOUND;
    if (index >= SIM_MAX_MIG) return NVML_ERROR_INVALID_ARGUMENT;
    /* The index is the MIG device's own; an empty one is a hole, not the end of the list. */
    if (!__atomic_load_n(&md->inst[index].active, __ATOMIC_ACQUIRE)) return NVML_ERROR_NOT_FOUND;
    *mig = &g_mig_handles[idx][index];
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceId(nvmlDevice_t device, unsigned int *id) {
    DEV_ENTER(nvmlDeviceGetGpuInstanceId); NEED(id);
    unsigned gi;
    dev_place(d, &gi);
    if (gi == SIM_MIG_NONE) return NVML_ERROR_INVALID_ARGUMENT; /* not a MIG handle */
    *id = gi;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeInstanceId(nvmlDevice_t device, unsigned int *id) {
    DEV_ENTER(nvmlDeviceGetComputeInstanceId); NEED(id);
    int parent, slot;
    sim_mig_t *m = mig_of(d, &parent, &slot);
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    *id = m->ci_id;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t device, nvmlDevice_t *parent_out) {
    DEV_ENTER(nvmlDeviceGetDeviceHandleFromMigDeviceHandle); NEED(parent_out);
    int parent, slot;
    if (!mig_of(d, &parent, &slot)) return NVML_ERROR_INVALID_ARGUMENT;
    *parent_out = &g_handles[parent];
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId, nvmlGpmSample_t s) {
    DEV_ENTER(nvmlGpmMigSampleGet); NEED(s);
    if (RV(gpm_supported) == 0) return NVML_ERROR_NOT_SUPPORTED;
    int idx = (int)(d - g_st->dev);
    sim_mig_dev_t *md = &g_st->mig[idx];
    if (!__atomic_load_n(&md->enabled, __ATOMIC_ACQUIRE)) return NVML_ERROR_NOT_SUPPORTED;
    /* The GPU instance's activity: its compute instances', weighted by their share of its
     * slices (memory bandwidth is the GPU instance's own: the highest any of them reports). */
    double w = 0, sm = 0, occ = 0, tensor = 0, dram = 0, fp16 = 0, fp32 = 0, fp64 = 0;
    for (int i = 0; i < SIM_MAX_MIG; i++) {
        sim_mig_t *m = &md->inst[i];
        if (!__atomic_load_n(&m->active, __ATOMIC_ACQUIRE) || m->gi_id != gpuInstanceId) continue;
        const sim_dev_t *q = &m->dev;
        double k = m->slices ? (double)m->ci_slices / m->slices : 1.0;
        w += k;
        sm += k * q->val[R_sm_active]; occ += k * q->val[R_sm_occupancy]; tensor += k * q->val[R_tensor_active];
        fp16 += k * q->val[R_fp16_active]; fp32 += k * q->val[R_fp32_active]; fp64 += k * q->val[R_fp64_active];
        if (q->val[R_dram_active] > dram) dram = q->val[R_dram_active];
    }
    if (w == 0) return NVML_ERROR_INVALID_ARGUMENT; /* no such GPU instance */
    s->dev = idx; s->gi = gpuInstanceId; s->ts_us = now_us();
    s->sm = sm; s->occ = occ; s->tensor = tensor; s->dram = dram; s->fp16 = fp16; s->fp32 = fp32;
    s->fp64 = fp64; s->gfx = sm;
    s->pcie_tx = s->pcie_rx = 0;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Control (the node daemon)                                                */
/* ------------------------------------------------------------------------ */
SIM_EXPORT int simnode_mig_max(void) { return SIM_MAX_MIG; }

/* MIG mode on or off; turning it off destroys every instance. */
SIM_EXPORT int simnode_mig_enable(int dev, int on) {
    if (!ctl_dev(dev)) return -1;
    sim_mig_dev_t *md = &g_ctl->mig[dev];
    if (!on) for (int s = 0; s < SIM_MAX_MIG; s++) __atomic_store_n(&md->inst[s].active, 0, __ATOMIC_RELEASE);
    __atomic_store_n(&md->enabled, on ? 1 : 0, __ATOMIC_RELEASE);
    __atomic_fetch_add(&md->gen, 1, __ATOMIC_ACQ_REL);
    return 0;
}

/* Creates the MIG device (compute instance ci_id of GPU instance gi_id) at MIG device index
 * ``slot`` (-1: the lowest free one); the slot, or -1 bad argument, -2 no free slot, -3
 * (gi_id, ci_id) in use, -4 that slot in use.  ``profile`` is the MIG device's profile name
 * ("3g.40gb", "1c.3g.40gb").  Readings start as the parent's, then the instance's own memory
 * and SM count. */
SIM_EXPORT int simnode_mig_create(int dev, int slot, unsigned gi_id, unsigned ci_id, const char *profile,
                                  unsigned profile_id, unsigned slices, unsigned ci_slices,
                                  double memory_mib, double sm_count, const char *uuid) {
    sim_dev_t *pd = ctl_dev(dev);
    if (!pd || !profile || !uuid || slices == 0 || slices > 7 || ci_slices == 0 || ci_slices > slices ||
        !(memory_mib > 0) || slot < -1 || slot >= SIM_MAX_MIG)
        return -1;
    sim_mig_dev_t *md = &g_ctl->mig[dev];
    int free_slot = -1;
    for (int s = 0; s < SIM_MAX_MIG; s++) {
        if (md->inst[s].active) {
            if (md->inst[s].gi_id == gi_id && md->inst[s].ci_id == ci_id) return -3;
            continue;
        }
        if (free_slot < 0) free_slot = s;
    }
    if (slot >= 0 && md->inst[slot].active) return -4;
    if (slot < 0) slot = free_slot;
    if (slot < 0) return -2;
    sim_mig_t *m = &md->inst[slot];
    m->gi_id = gi_id; m->ci_id = ci_id; m->profile_id = profile_id; m->slices = slices; m->ci_slices = ci_slices;
    snprintf(m->profile, SIM_MIG_PROFILE, "%s", profile);
    sim_dev_t *q = &m->dev;
    memcpy(q, pd, sizeof *q);
    q->lost = 0; q->hang_ms = 0; q->supported_events = 0;
    snprintf(q->name, SIM_STR, "%.60s MIG %.31s", pd->name, profile);
    snprintf(q->uuid, SIM_STR, "%s", uuid);
    q->val[R_memory_total_mib] = memory_mib;
    q->val[R_memory_used_mib] = 0; q->val[R_memory_reserved_mib] = 0;
    q->val[R_multiprocessor_count] = sm_count;
    double share = pd->val[R_memory_total_mib] > 0 ? memory_mib / pd->val[R_memory_total_mib] : 0;
    q->val[R_bar1_total_mib] = (double)(long long)(pd->val[R_bar1_total_mib] * share);
    q->val[R_bar1_used_mib] = 0;
    q->val[R_sm_active] = q->val[R_sm_occupancy] = q->val[R_tensor_active] = q->val[R_dram_active] = 0;
    q->val[R_fp16_active] = q->val[R_fp32_active] = q->val[R_fp64_active] = 0;
    q->val[R_ecc_dbe_volatile] = 0; /* the instance's own (non-DRAM) uncorrectable volatile count */
    q->unsup[R_memory_total_mib] = q->unsup[R_memory_used_mib] = 0;
    memset(q->fn_unsup, 1, sizeof q->fn_unsup);
    for (size_t i = 0; i < sizeof g_mig_served / sizeof g_mig_served[0]; i++) q->fn_unsup[g_mig_served[i]] = pd->fn_unsup[g_mig_served[i]];
    __atomic_store_n(&m->active, 1, __ATOMIC_RELEASE);
    __atomic_fetch_add(&md->gen, 1, __ATOMIC_ACQ_REL);
    return slot;
}

SIM_EXPORT int simnode_mig_destroy(int dev, int slot) {
    if (!ctl_dev(dev) || slot < 0 || slot >= SIM_MAX_MIG) return -1;
    sim_mig_dev_t *md = &g_ctl->mig[dev];
    if (!md->inst[slot].active) return -1;
    __atomic_store_n(&md->inst[slot].active, 0, __ATOMIC_RELEASE);
    __atomic_fetch_add(&md->gen, 1, __ATOMIC_ACQ_REL);
    return 0;
}

SIM_EXPORT int simnode_mig_set_reading(int dev, int slot, int rid, double value) {
    if (!ctl_dev(dev) || slot < 0 || slot >= SIM_MAX_MIG || rid < 0 || rid >= R_COUNT || !isfinite(value)) return -1;
    sim_mig_t *m = &g_ctl->mig[dev].inst[slot];
    if (!m->active) return -1;
    __atomic_store(&m->dev.val[rid], &value, __ATOMIC_RELEASE);
    return 0;
}

/* Places process (pid, dev) on compute instance ci of GPU instance gi (SIM_MIG_NONE: the
 * whole GPU). */
SIM_EXPORT int simnode_proc_set_mig(int dev, unsigned int pid, unsigned int gi, unsigned int ci) {
    if (!ctl_dev(dev)) return -1;
    int existing;
    int slot = proc_slot(dev, pid, &existing);
    if (slot < 0 || !existing) return -1;
    proc_write_begin();
    g_ctl->proc[slot].gi = gi;
    g_ctl->proc[slot].ci = gi == SIM_MIG_NONE ? SIM_MIG_NONE : ci;
    proc_write_end();
    return 0;
}

/* An event attributable to compute instance ci of GPU instance gi (an instance-scoped XID;
 * ci SIM_MIG_NONE: the GPU instance as a whole). */
SIM_EXPORT long long simnode_push_event_mig(int dev, unsigned long long type, unsigned long long data,
                                            unsigned int gi, unsigned int ci) {
    sim_dev_t *d = ctl_dev(dev);
    if (!d || type == 0 || (type & (type - 1))) return -1;
    uint64_t s;
    sim_event_t *e = ring_claim(dev, &s);
    e->type = type; e->data = data; e->gi = gi; e->ci = ci;
    return ring_publish(e, s);
}
