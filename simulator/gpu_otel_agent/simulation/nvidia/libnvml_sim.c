/*
 * Simulated NVML: a libnvidia-ml.so.1 built from NVIDIA's own nvml.h.
 *
 * Every client process that loads this library maps the same state file
 * (MAP_SHARED), found through $GPU_SIM_NODE at nvmlInit time, so nvitop, gpustat,
 * the agent and tests all see one node.  The state layout lives only here: the
 * Python node daemon drives it through the exported simnode_* control functions.
 *
 * Missing symbols (an "older driver") are produced at link time with a version
 * script that makes the named functions local, so dlsym fails exactly as on a
 * real driver that lacks them.
 */
#define _GNU_SOURCE
#define NVML_NO_UNVERSIONED_FUNC_DEFS
#include <nvml.h>

#include "simcore.h"

#define SIM_MAGIC 0x314D49534C4D564EULL /* "NVMLSIM1" */
#define SIM_LAYOUT_VERSION 9
#define SIM_MAX_DEV 64
#define SIM_MAX_PROC 4096
/* The driver queues every event with data for each open event set: nv_post_event
 * (NVIDIA/open-gpu-kernel-modules kernel-open/nvidia/nv.c) appends a kmalloc'd entry to the
 * file's list and drops one only when that allocation fails, so a reader that falls behind
 * for a moment loses nothing. A ring stands in for that list here: 65536 events (2 MiB of
 * the state file) hold a 10 000-XID storm even while a reader is off the CPU; with 1024, a
 * Python reader that lost the GIL for 40 ms during a storm lost events a real driver keeps. */
#define SIM_RING 65536
#define SIM_STR 96
#define SIM_SAMPLE_PERIOD_US 167000 /* the driver's utilization sampling period */
#define SIM_PROC_SAMPLE_US 500000ULL /* a new per-process sample every half second */
#define SIM_PROC_OLDER 3 /* older samples kept per process: 1.5 s of history */

/* ------------------------------------------------------------------------ */
/* Readings: one double per (device, reading), plus an "unsupported" flag.  */
/* The names are the scenario keys; Python asks for them by name.           */
/* ------------------------------------------------------------------------ */
#define SIM_READINGS(X)                                                      \
    X(utilization_gpu) X(utilization_memory) X(memory_total_mib)             \
    X(memory_used_mib) X(memory_reserved_mib) X(bar1_total_mib)              \
    X(bar1_used_mib) X(temperature_c) X(memory_temperature_c) X(power_w)     \
    X(power_limit_w) X(power_default_limit_w) X(power_min_limit_w)           \
    X(power_max_limit_w) X(sm_clock_mhz) X(memory_clock_mhz)                 \
    X(graphics_clock_mhz) X(video_clock_mhz) X(max_sm_clock_mhz)             \
    X(max_memory_clock_mhz) X(max_graphics_clock_mhz) X(max_video_clock_mhz) \
    X(app_sm_clock_mhz) X(app_memory_clock_mhz) X(fan_percent) X(num_fans)   \
    X(pstate) X(encoder_util) X(decoder_util) X(jpg_util) X(ofa_util)        \
    X(pcie_tx_kb_s) X(pcie_rx_kb_s) X(nvlink_tx_kib_s) X(nvlink_rx_kib_s)    \
    X(nvlink_links) X(clocks_event_reasons) X(sm_active) X(sm_occupancy)     \
    X(tensor_active) X(dram_active) X(fp16_active) X(fp32_active)            \
    X(fp64_active) X(pcie_link_gen) X(pcie_link_width) X(pcie_max_link_gen)  \
    X(pcie_max_link_width) X(energy_mj) X(pcie_tx_bytes) X(pcie_rx_bytes)    \
    X(nvlink_tx_kib) X(nvlink_rx_kib) X(pcie_replay_counter)                 \
    X(ecc_sbe_volatile) X(ecc_dbe_volatile) X(ecc_sbe_aggregate)             \
    X(ecc_dbe_aggregate) X(retired_pages_sbe) X(retired_pages_dbe)           \
    X(retired_pages_pending) X(remapped_rows_correctable)                    \
    X(remapped_rows_uncorrectable) X(remapped_rows_pending)                  \
    X(remapped_rows_failure) X(violation_power_ns) X(violation_thermal_ns)   \
    X(violation_sync_boost_ns) X(violation_board_limit_ns)                   \
    X(violation_low_util_ns) X(violation_reliability_ns)                     \
    X(violation_app_clocks_ns) X(violation_base_clocks_ns)                   \
    X(violation_sw_thermal_ns) X(violation_hw_thermal_ns)                    \
    X(violation_hw_power_brake_ns) X(persistence_mode) X(compute_mode)       \
    X(ecc_mode) X(display_mode) X(display_active) X(mig_mode)                \
    X(architecture) X(cuda_cc_major) X(cuda_cc_minor) X(brand)               \
    X(pci_device_id) X(pci_subsystem_id) X(minor_number) X(gpm_supported)    \
    X(multiprocessor_count) X(power_source) X(recovery_action)              \
    X(pcie_counter_bits) X(pcie_replay_rollover) X(temperature_slowdown_c)    \
    X(power_average_w) X(field_age_ms) X(nvlink_speed_mbps) X(nvlink_version) \
    X(fabric_state) X(fabric_status) X(fabric_clique_id) X(fabric_health_mask) \
    X(fabric_health_summary) X(fabric_cluster_uuid_0) X(fabric_cluster_uuid_1) \
    X(fabric_cluster_uuid_2) X(fabric_cluster_uuid_3)

/* NVLink per link (SIM_NVLINKS links): state 1 = active, 0 = inactive, and the data-link error
 * counters nvmlDeviceGetNvLinkErrorCounter serves (set, not integrated). Contiguous per kind. */
#define SIM_NVLINKS 18
#define SIM_NVLINK_READINGS(X)                                               \
    X(nvlink_state_0) X(nvlink_state_1) X(nvlink_state_2)                    \
    X(nvlink_state_3) X(nvlink_state_4) X(nvlink_state_5)                    \
    X(nvlink_state_6) X(nvlink_state_7) X(nvlink_state_8)                    \
    X(nvlink_state_9) X(nvlink_state_10) X(nvlink_state_11)                  \
    X(nvlink_state_12) X(nvlink_state_13) X(nvlink_state_14)                 \
    X(nvlink_state_15) X(nvlink_state_16) X(nvlink_state_17)                 \
    X(nvlink_crc_flit_errors_0) X(nvlink_crc_flit_errors_1)                  \
    X(nvlink_crc_flit_errors_2) X(nvlink_crc_flit_errors_3)                  \
    X(nvlink_crc_flit_errors_4) X(nvlink_crc_flit_errors_5)                  \
    X(nvlink_crc_flit_errors_6) X(nvlink_crc_flit_errors_7)                  \
    X(nvlink_crc_flit_errors_8) X(nvlink_crc_flit_errors_9)                  \
    X(nvlink_crc_flit_errors_10) X(nvlink_crc_flit_errors_11)                \
    X(nvlink_crc_flit_errors_12) X(nvlink_crc_flit_errors_13)                \
    X(nvlink_crc_flit_errors_14) X(nvlink_crc_flit_errors_15)                \
    X(nvlink_crc_flit_errors_16) X(nvlink_crc_flit_errors_17)                \
    X(nvlink_replay_errors_0) X(nvlink_replay_errors_1)                      \
    X(nvlink_replay_errors_2) X(nvlink_replay_errors_3)                      \
    X(nvlink_replay_errors_4) X(nvlink_replay_errors_5)                      \
    X(nvlink_replay_errors_6) X(nvlink_replay_errors_7)                      \
    X(nvlink_replay_errors_8) X(nvlink_replay_errors_9)                      \
    X(nvlink_replay_errors_10) X(nvlink_replay_errors_11)                    \
    X(nvlink_replay_errors_12) X(nvlink_replay_errors_13)                    \
    X(nvlink_replay_errors_14) X(nvlink_replay_errors_15)                    \
    X(nvlink_replay_errors_16) X(nvlink_replay_errors_17)                    \
    X(nvlink_recovery_errors_0) X(nvlink_recovery_errors_1)                  \
    X(nvlink_recovery_errors_2) X(nvlink_recovery_errors_3)                  \
    X(nvlink_recovery_errors_4) X(nvlink_recovery_errors_5)                  \
    X(nvlink_recovery_errors_6) X(nvlink_recovery_errors_7)                  \
    X(nvlink_recovery_errors_8) X(nvlink_recovery_errors_9)                  \
    X(nvlink_recovery_errors_10) X(nvlink_recovery_errors_11)                \
    X(nvlink_recovery_errors_12) X(nvlink_recovery_errors_13)                \
    X(nvlink_recovery_errors_14) X(nvlink_recovery_errors_15)                \
    X(nvlink_recovery_errors_16) X(nvlink_recovery_errors_17)

#define X_ENUM(n) R_##n,
enum { SIM_READINGS(X_ENUM) SIM_NVLINK_READINGS(X_ENUM) R_COUNT };
#define X_STR(n) #n,
static const char *const g_reading_names[] = {SIM_READINGS(X_STR) SIM_NVLINK_READINGS(X_STR)};

/* ------------------------------------------------------------------------ */
/* Exported NVML functions, for call counting and per-device "unsupported". */
/* ------------------------------------------------------------------------ */
#define SIM_FUNCS(X)                                                          \
    X(nvmlInit_v2) X(nvmlInit) X(nvmlInitWithFlags) X(nvmlShutdown)            \
    X(nvmlErrorString) X(nvmlSystemGetDriverVersion)                          \
    X(nvmlSystemGetNVMLVersion) X(nvmlSystemGetCudaDriverVersion)             \
    X(nvmlSystemGetCudaDriverVersion_v2) X(nvmlSystemGetProcessName)          \
    X(nvmlDeviceGetCount_v2) X(nvmlDeviceGetCount)                            \
    X(nvmlDeviceGetHandleByIndex_v2) X(nvmlDeviceGetHandleByIndex)            \
    X(nvmlDeviceGetHandleByUUID) X(nvmlDeviceGetHandleByPciBusId_v2)          \
    X(nvmlDeviceGetHandleByPciBusId) X(nvmlDeviceGetName)                     \
    X(nvmlDeviceGetUUID) X(nvmlDeviceGetSerial) X(nvmlDeviceGetIndex)         \
    X(nvmlDeviceGetMinorNumber) X(nvmlDeviceGetBrand)                         \
    X(nvmlDeviceGetArchitecture) X(nvmlDeviceGetCudaComputeCapability)        \
    X(nvmlDeviceGetPciInfo_v3) X(nvmlDeviceGetPciInfo_v2)                     \
    X(nvmlDeviceGetPciInfo) X(nvmlDeviceGetPciInfoExt)                        \
    X(nvmlDeviceGetMemoryInfo) X(nvmlDeviceGetMemoryInfo_v2)                  \
    X(nvmlDeviceGetBAR1MemoryInfo) X(nvmlDeviceGetUtilizationRates)           \
    X(nvmlDeviceGetEncoderUtilization) X(nvmlDeviceGetDecoderUtilization)     \
    X(nvmlDeviceGetJpgUtilization) X(nvmlDeviceGetOfaUtilization)             \
    X(nvmlDeviceGetTemperature) X(nvmlDeviceGetTemperatureV)                  \
    X(nvmlDeviceGetPowerUsage) X(nvmlDeviceGetEnforcedPowerLimit)             \
    X(nvmlDeviceGetPowerManagementLimit)                                      \
    X(nvmlDeviceGetPowerManagementLimitConstraints)                           \
    X(nvmlDeviceGetPowerManagementDefaultLimit)                               \
    X(nvmlDeviceGetTotalEnergyConsumption) X(nvmlDeviceGetPowerSource)        \
    X(nvmlDeviceGetClockInfo) X(nvmlDeviceGetMaxClockInfo)                    \
    X(nvmlDeviceGetApplicationsClock) X(nvmlDeviceGetDefaultApplicationsClock)\
    X(nvmlDeviceGetClock) X(nvmlDeviceGetFanSpeed) X(nvmlDeviceGetFanSpeed_v2)\
    X(nvmlDeviceGetTargetFanSpeed) X(nvmlDeviceGetNumFans)                    \
    X(nvmlDeviceGetPerformanceState) X(nvmlDeviceGetPowerState)               \
    X(nvmlDeviceGetCurrentClocksEventReasons)                                 \
    X(nvmlDeviceGetCurrentClocksThrottleReasons)                              \
    X(nvmlDeviceGetSupportedClocksEventReasons)                               \
    X(nvmlDeviceGetSupportedClocksThrottleReasons)                            \
    X(nvmlDeviceGetSupportedEventTypes)                                       \
    X(nvmlDeviceGetComputeRunningProcesses_v3)                                \
    X(nvmlDeviceGetComputeRunningProcesses_v2)                                \
    X(nvmlDeviceGetComputeRunningProcesses)                                   \
    X(nvmlDeviceGetGraphicsRunningProcesses_v3)                               \
    X(nvmlDeviceGetGraphicsRunningProcesses_v2)                               \
    X(nvmlDeviceGetGraphicsRunningProcesses)                                  \
    X(nvmlDeviceGetMPSComputeRunningProcesses_v3)                             \
    X(nvmlDeviceGetMPSComputeRunningProcesses_v2)                             \
    X(nvmlDeviceGetMPSComputeRunningProcesses)                                \
    X(nvmlDeviceGetRunningProcessDetailList)                                  \
    X(nvmlDeviceGetProcessUtilization) X(nvmlDeviceGetFieldValues)            \
    X(nvmlDeviceGetRemappedRows) X(nvmlDeviceGetRetiredPages)                 \
    X(nvmlDeviceGetRetiredPagesPendingStatus) X(nvmlDeviceGetTotalEccErrors)  \
    X(nvmlDeviceGetMemoryErrorCounter) X(nvmlDeviceGetPcieReplayCounter)      \
    X(nvmlDeviceGetViolationStatus) X(nvmlDeviceGetNvLinkState)               \
    X(nvmlGpmQueryDeviceSupport) X(nvmlGpmSampleAlloc) X(nvmlGpmSampleFree)   \
    X(nvmlGpmSampleGet) X(nvmlGpmMetricsGet) X(nvmlDeviceGetPcieThroughput)   \
    X(nvmlDeviceGetPcieSpeed) X(nvmlDeviceGetPersistenceMode)                 \
    X(nvmlDeviceGetComputeMode) X(nvmlDeviceGetDisplayMode)                   \
    X(nvmlDeviceGetDisplayActive) X(nvmlDeviceGetEccMode)                     \
    X(nvmlDeviceGetMigMode) X(nvmlDeviceIsMigDeviceHandle)                    \
    X(nvmlDeviceGetMaxMigDeviceCount) X(nvmlDeviceGetMigDeviceHandleByIndex)  \
    X(nvmlDeviceGetGpuInstanceId) X(nvmlDeviceGetComputeInstanceId)           \
    X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle)                           \
    X(nvmlDeviceGetCurrPcieLinkGeneration) X(nvmlDeviceGetCurrPcieLinkWidth)  \
    X(nvmlDeviceGetMaxPcieLinkGeneration) X(nvmlDeviceGetMaxPcieLinkWidth)    \
    X(nvmlDeviceGetGpuMaxPcieLinkGeneration) X(nvmlDeviceGetVbiosVersion)     \
    X(nvmlDeviceGetInforomImageVersion) X(nvmlDeviceGetBoardPartNumber)       \
    X(nvmlDeviceGetMultiGpuBoard) X(nvmlDeviceGetNumGpuCores)                 \
    X(nvmlDeviceGetMemoryBusWidth) X(nvmlDeviceGetAttributes_v2)              \
    X(nvmlDeviceGetConfComputeMemSizeInfo) X(nvmlDeviceGetDriverModel_v2)     \
    X(nvmlDeviceGetAccountingMode) X(nvmlDeviceGetSamples)                    \
    X(nvmlEventSetCreate) X(nvmlDeviceRegisterEvents) X(nvmlEventSetWait_v2)  \
    X(nvmlEventSetWait) X(nvmlEventSetFree)                                  \
    X(nvmlDeviceGetGpuUptime_v1) X(nvmlGpmMigSampleGet)                       \
    X(nvmlDeviceGetNvLinkErrorCounter) X(nvmlDeviceGetTemperatureThreshold)   \
    X(nvmlDeviceGetGpuFabricInfo) X(nvmlDeviceGetGpuFabricInfoV)

#define X_FENUM(n) FN_##n,
enum { SIM_FUNCS(X_FENUM) FN_COUNT };
static const char *const g_func_names[] = {SIM_FUNCS(X_STR)};

#include "nvml_chaos.h" /* faults: chaos, targeted failures, driver reload, RESET_REQUIRED */

/* ------------------------------------------------------------------------ */
/* Shared state                                                             */
/* ------------------------------------------------------------------------ */
typedef struct {
    char name[SIM_STR];
    char uuid[SIM_STR];
    char serial[SIM_STR];
    char pci_bus_id[SIM_STR];
    char vbios[SIM_STR];
    char board_part[SIM_STR];
    int32_t lost;
    int32_t hang_ms;
    uint64_t supported_events;
    double val[R_COUNT];
    uint8_t unsup[R_COUNT];
    uint8_t fn_unsup[FN_COUNT];
} sim_dev_t;

#include "nvml_sim_mig_types.h"

typedef struct {
    uint64_t ts_us;
    double sm, mem, enc, dec;
} sim_sample_t;

typedef struct {
    uint32_t pid;
    int32_t dev; /* -1: free slot */
    uint32_t kinds; /* bit0 compute, bit1 graphics, bit2 mps */
    uint32_t gi;    /* the GPU instance it runs on, SIM_MIG_NONE: the whole GPU */
    uint32_t ci;    /* its compute instance in that GPU instance (SIM_MIG_NONE with gi) */
    uint64_t used_mem_bytes;
    double sm_util, mem_util, enc_util, dec_util;
    uint64_t sample_ts_us;
    /* Older samples, newest first (ts 0 = none): the driver's buffer holds several samples
     * per process, and nvmlDeviceGetProcessUtilization returns every one newer than the
     * caller's lastSeenTimeStamp, in no promised order. */
    sim_sample_t older[SIM_PROC_OLDER];
} sim_proc_t;

typedef struct {
    uint64_t seq;
    int32_t dev;
    uint32_t gi;    /* the GPU instance an XID is attributable to, SIM_MIG_NONE: none */
    uint32_t ci;    /* and its compute instance (SIM_MIG_NONE: none, or the whole GPU instance) */
    uint64_t type;
    uint64_t data;
} sim_event_t;

typedef struct {
    uint64_t magic;
    uint32_t layout_version;
    uint32_t n_devices;
    char driver_version[SIM_STR];
    char nvml_version[SIM_STR];
    int32_t cuda_driver_version;
    uint32_t proc_gen;          /* seqlock for the process table, odd = writing */
    uint32_t ev_futex;          /* low 32 bits of ev_seq, futex word */
    uint32_t ev_lock;
    uint64_t ev_seq;
    uint64_t proc_last_touch_us;
    sim_event_t ring[SIM_RING];
    sim_dev_t dev[SIM_MAX_DEV];
    sim_proc_t proc[SIM_MAX_PROC];
    uint64_t calls[FN_COUNT][SIM_MAX_DEV + 1]; /* last column: total */
    sim_chaos_t chaos;
    sim_mig_dev_t mig[SIM_MAX_DEV];
} sim_state_t;

struct nvmlDevice_st { unsigned int index; };
struct nvmlEventSet_st {
    uint64_t last_seq;
    uint32_t driver_gen; /* a set from before a driver reload answers UNKNOWN */
    uint64_t mask[SIM_MAX_DEV];
};
struct nvmlGpmSample_st {
    int dev;
    unsigned gi; /* SIM_MIG_NONE: the whole GPU (nvmlGpmSampleGet), else nvmlGpmMigSampleGet */
    uint64_t ts_us;
    double sm, occ, tensor, dram, fp16, fp32, fp64, gfx, pcie_tx, pcie_rx;
};

static struct nvmlDevice_st g_handles[SIM_MAX_DEV];

#define SIMCORE_STATE_T sim_state_t
#define SIMCORE_DEV_T sim_dev_t
#define SIMCORE_EVENT_T sim_event_t
#define SIMCORE_MAGIC SIM_MAGIC
#define SIMCORE_LAYOUT_VERSION SIM_LAYOUT_VERSION
#define SIMCORE_MAX_DEV SIM_MAX_DEV
#define SIMCORE_MAX_PROC SIM_MAX_PROC
#define SIMCORE_RING SIM_RING
#define SIMCORE_FN_SLOTS FN_COUNT
#define SIMCORE_NA unsup
#define SIMCORE_CTL(name) SIMCORE_CAT(simnode_, name)
#include "simcore_state.h"

/* MIG handles and MIG-mode rules (nvml_sim_mig.c, included at the end). */
static int mig_handle(nvmlDevice_t device, int *parent, int *slot);
static nvmlReturn_t mig_enter(int fn, int parent, int slot, sim_dev_t **out);
static nvmlReturn_t mig_parent_rule(int fn, const sim_dev_t *d);
static int dev_place(const sim_dev_t *d, unsigned *gi);
static int dev_place_ci(const sim_dev_t *d, unsigned *gi, unsigned *ci);
static nvmlReturn_t mig_by_uuid(const char *uuid, nvmlDevice_t *device);
static void mig_attributes(const sim_dev_t *d, nvmlDeviceAttributes_t *a);
static int mig_parent_on(const sim_dev_t *d);
static int mig_index_of(const sim_dev_t *d, unsigned *index);
static int mig_field_unsupported(const sim_dev_t *d, unsigned field);

/* ------------------------------------------------------------------------ */
/* Common prologue for NVML entry points                                    */
/* ------------------------------------------------------------------------ */
static nvmlReturn_t dev_enter_state(int fn, nvmlDevice_t device, sim_dev_t **out) {
    int parent, slot;
    if (mig_handle(device, &parent, &slot)) return mig_enter(fn, parent, slot, out);
    switch (simcore_dev_enter(fn, device, out)) {
    case SIMCORE_OK: return mig_parent_rule(fn, *out);
    case SIMCORE_UNINIT: return NVML_ERROR_UNINITIALIZED;
    case SIMCORE_BAD_HANDLE: return NVML_ERROR_INVALID_ARGUMENT;
    case SIMCORE_LOST: return NVML_ERROR_GPU_IS_LOST;
    case SIMCORE_FN_UNSUP: return NVML_ERROR_NOT_SUPPORTED;
    }
    return NVML_ERROR_UNKNOWN;
}
/* The node's state, then the faults of nvml_chaos.h (driver reload, RESET_REQUIRED, chaos). */
static nvmlReturn_t dev_enter(int fn, nvmlDevice_t device, sim_dev_t **out) {
    nvmlReturn_t r = dev_enter_state(fn, device, out);
    if (r == NVML_ERROR_UNINITIALIZED || chaos_stale_client(&g_st->chaos)) return NVML_ERROR_UNINITIALIZED;
    if (r != NVML_SUCCESS) return r;
    unsigned gi;
    int idx = dev_place(*out, &gi); /* a MIG instance's faults are its physical GPU's */
    if (__atomic_load_n(&g_st->chaos.reset_required[idx], __ATOMIC_ACQUIRE)) return NVML_ERROR_RESET_REQUIRED;
    return chaos_call(&g_st->chaos, fn, idx);
}
/* The same for calls without a device handle (dev: the index a call names, else -1). */
static nvmlReturn_t sys_faults(int fn, int dev) {
    if (chaos_stale_client(&g_st->chaos)) return NVML_ERROR_UNINITIALIZED;
    return chaos_call(&g_st->chaos, fn, dev);
}

#define DEV_ENTER(fname)                                              \
    sim_dev_t *d = NULL;                                              \
    do {                                                              \
        nvmlReturn_t _r = dev_enter(FN_##fname, device, &d);          \
        if (_r != NVML_SUCCESS) return _r;                            \
    } while (0)

#define SYS_ENTER(fname)                                              \
    do {                                                              \
        count_call(FN_##fname, -1);                                   \
        if (!g_st || g_init_count <= 0) return NVML_ERROR_UNINITIALIZED; \
        nvmlReturn_t _f = sys_faults(FN_##fname, -1);                 \
        if (_f != NVML_SUCCESS) return _f;                            \
    } while (0)

#define NEED(ptr) do { if (!(ptr)) return NVML_ERROR_INVALID_ARGUMENT; } while (0)
#define RV(n) (d->val[R_##n])
#define SUP(n) do { if (d->unsup[R_##n]) return NVML_ERROR_NOT_SUPPORTED; } while (0)

static unsigned int u32(double v) { return v <= 0 ? 0u : v >= 4294967295.0 ? 4294967295u : (unsigned int)llround(v); }
/* Saturating: a reading at or past 2^64 is the counter's largest value, 2^64-1 (a counter a
 * driver serves at its limit; tests set it to see the agent cope). llround past 2^63 is
 * undefined (x86 gives 2^63), so values past it are converted without rounding. */
static unsigned long long u64(double v) {
    if (!(v > 0)) return 0ull;
    if (v >= 18446744073709551616.0) return ULLONG_MAX;
    if (v >= 9223372036854775808.0) return (unsigned long long)v;
    return (unsigned long long)llround(v);
}

static nvmlReturn_t copy_str(char *dst, unsigned int len, const char *src) {
    if (!dst) return NVML_ERROR_INVALID_ARGUMENT;
    size_t n = strnlen(src, SIM_STR);
    if (len < n + 1) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(dst, src, n);
    dst[n] = 0;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Init / system                                                            */
/* ------------------------------------------------------------------------ */
static nvmlReturn_t do_init(void) {
    pthread_mutex_lock(&g_init_lock);
    if (!g_st) {
        const char *path = getenv("GPU_SIM_NODE");
        if (!path || !*path) { pthread_mutex_unlock(&g_init_lock); return NVML_ERROR_DRIVER_NOT_LOADED; }
        g_st = map_state(path, 0, 0);
        if (!g_st) { pthread_mutex_unlock(&g_init_lock); return NVML_ERROR_DRIVER_NOT_LOADED; }
        for (unsigned i = 0; i < SIM_MAX_DEV; i++) g_handles[i].index = i;
    }
    g_init_count++;
    g_client_driver_gen = __atomic_load_n(&g_st->chaos.driver_gen, __ATOMIC_ACQUIRE); /* (re)attach */
    pthread_mutex_unlock(&g_init_lock);
    return NVML_SUCCESS;
}

SIM_EXPORT nvmlReturn_t nvmlInit_v2(void) { nvmlReturn_t r = do_init(); count_call(FN_nvmlInit_v2, -1); return r; }
SIM_EXPORT nvmlReturn_t nvmlInit(void) { nvmlReturn_t r = do_init(); count_call(FN_nvmlInit, -1); return r; }
SIM_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    nvmlReturn_t r = do_init();
    count_call(FN_nvmlInitWithFlags, -1);
    return r;
}

SIM_EXPORT nvmlReturn_t nvmlShutdown(void) {
    count_call(FN_nvmlShutdown, -1);
    pthread_mutex_lock(&g_init_lock);
    if (g_init_count <= 0) { pthread_mutex_unlock(&g_init_lock); return NVML_ERROR_UNINITIALIZED; }
    g_init_count--; /* the mapping stays: other threads may still be inside a call */
    pthread_mutex_unlock(&g_init_lock);
    return NVML_SUCCESS;
}

SIM_EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
    count_call(FN_nvmlErrorString, -1);
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NO_PERMISSION: return "Insufficient Permissions";
    case NVML_ERROR_ALREADY_INITIALIZED: return "Already Initialized";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_INSUFFICIENT_POWER: return "Insufficient External Power";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_TIMEOUT: return "Timeout";
    case NVML_ERROR_IRQ_ISSUE: return "Interrupt Request Issue";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    case NVML_ERROR_FUNCTION_NOT_FOUND: return "Function Not Found";
    case NVML_ERROR_CORRUPTED_INFOROM: return "Corrupted infoROM";
    case NVML_ERROR_GPU_IS_LOST: return "GPU is lost";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_OPERATING_SYSTEM: return "The operating system has blocked the request.";
    case NVML_ERROR_LIB_RM_VERSION_MISMATCH: return "RM has detected an NVML/RM version mismatch.";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_MEMORY: return "Insufficient Memory";
    case NVML_ERROR_NO_DATA: return "No data";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient Resources";
    case NVML_ERROR_ARGUMENT_VERSION_MISMATCH: return "Version mismatch";
    case NVML_ERROR_DEPRECATED: return "Deprecated";
    case NVML_ERROR_NOT_READY: return "Not ready";
    case NVML_ERROR_GPU_NOT_FOUND: return "GPU not found";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    default: return "Unknown Error";
    }
}

SIM_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    SYS_ENTER(nvmlSystemGetDriverVersion);
    return copy_str(version, length, g_st->driver_version);
}
SIM_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    SYS_ENTER(nvmlSystemGetNVMLVersion);
    return copy_str(version, length, g_st->nvml_version);
}
SIM_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
    SYS_ENTER(nvmlSystemGetCudaDriverVersion);
    NEED(v);
    *v = g_st->cuda_driver_version;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) {
    SYS_ENTER(nvmlSystemGetCudaDriverVersion_v2);
    NEED(v);
    *v = g_st->cuda_driver_version;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlSystemGetProcessName(unsigned int pid, char *name, unsigned int length) {
    SYS_ENTER(nvmlSystemGetProcessName);
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%u/comm", pid);
    FILE *f = fopen(path, "r");
    if (!f) return NVML_ERROR_NOT_FOUND;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *nl = strchr(buf, '\n');
    if (nl) *nl = 0;
    if (!name || length == 0) return NVML_ERROR_INVALID_ARGUMENT;
    snprintf(name, length, "%s", buf);
    return NVML_SUCCESS;
}

static nvmlReturn_t get_count(int fn, unsigned int *c) {
    if (!g_st || g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t f = sys_faults(fn, -1);
    if (f != NVML_SUCCESS) return f;
    NEED(c);
    *c = g_st->n_devices;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *c) { count_call(FN_nvmlDeviceGetCount_v2, -1); return get_count(FN_nvmlDeviceGetCount_v2, c); }
SIM_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *c) { count_call(FN_nvmlDeviceGetCount, -1); return get_count(FN_nvmlDeviceGetCount, c); }

static nvmlReturn_t by_index(int fn, unsigned int index, nvmlDevice_t *device) {
    count_call(fn, (int)index < SIM_MAX_DEV ? (int)index : -1);
    if (!g_st || g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t f = sys_faults(fn, (int)index < SIM_MAX_DEV ? (int)index : -1);
    if (f != NVML_SUCCESS) return f;
    NEED(device);
    if (index >= g_st->n_devices) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &g_handles[index];
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int i, nvmlDevice_t *device) { return by_index(FN_nvmlDeviceGetHandleByIndex_v2, i, device); }
SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int i, nvmlDevice_t *device) { return by_index(FN_nvmlDeviceGetHandleByIndex, i, device); }

SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    SYS_ENTER(nvmlDeviceGetHandleByUUID);
    NEED(uuid); NEED(device);
    for (unsigned i = 0; i < g_st->n_devices; i++) {
        if (strncmp(g_st->dev[i].uuid, uuid, SIM_STR) == 0) { *device = &g_handles[i]; return NVML_SUCCESS; }
    }
    return mig_by_uuid(uuid, device);
}

static nvmlReturn_t by_pci(int fn, const char *bus, nvmlDevice_t *device) {
    if (!g_st || g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t f = sys_faults(fn, -1);
    if (f != NVML_SUCCESS) return f;
    NEED(bus); NEED(device);
    for (unsigned i = 0; i < g_st->n_devices; i++) {
        const char *mine = g_st->dev[i].pci_bus_id;
        /* accept both the 8-digit and the legacy 4-digit domain forms */
        size_t lm = strlen(mine), lb = strlen(bus);
        if (strcasecmp(mine, bus) == 0 || (lb >= 12 && lm >= 12 && strcasecmp(mine + lm - 12, bus + lb - 12) == 0)) {
            *device = &g_handles[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *b, nvmlDevice_t *device) { count_call(FN_nvmlDeviceGetHandleByPciBusId_v2, -1); return by_pci(FN_nvmlDeviceGetHandleByPciBusId_v2, b, device); }
SIM_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *b, nvmlDevice_t *device) { count_call(FN_nvmlDeviceGetHandleByPciBusId, -1); return by_pci(FN_nvmlDeviceGetHandleByPciBusId, b, device); }

/* ------------------------------------------------------------------------ */
/* Identity                                                                 */
/* ------------------------------------------------------------------------ */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    DEV_ENTER(nvmlDeviceGetName); return copy_str(name, length, d->name);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    DEV_ENTER(nvmlDeviceGetUUID); return copy_str(uuid, length, d->uuid);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t device, char *serial, unsigned int length) {
    DEV_ENTER(nvmlDeviceGetSerial); return copy_str(serial, length, d->serial);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetVbiosVersion(nvmlDevice_t device, char *v, unsigned int length) {
    DEV_ENTER(nvmlDeviceGetVbiosVersion); return copy_str(v, length, d->vbios);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetInforomImageVersion(nvmlDevice_t device, char *v, unsigned int length) {
    DEV_ENTER(nvmlDeviceGetInforomImageVersion); return copy_str(v, length, "G520.0200.00.05");
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetBoardPartNumber(nvmlDevice_t device, char *v, unsigned int length) {
    DEV_ENTER(nvmlDeviceGetBoardPartNumber); return copy_str(v, length, d->board_part);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t device, unsigned int *index) {
    DEV_ENTER(nvmlDeviceGetIndex); NEED(index);
    if (mig_index_of(d, index)) return NVML_SUCCESS; /* a MIG handle: its MIG device index (nvml.h) */
    *index = (unsigned)(d - g_st->dev); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *v) {
    DEV_ENTER(nvmlDeviceGetMinorNumber); NEED(v); SUP(minor_number); *v = u32(RV(minor_number)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t device, nvmlBrandType_t *v) {
    DEV_ENTER(nvmlDeviceGetBrand); NEED(v); *v = (nvmlBrandType_t)u32(RV(brand)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t device, nvmlDeviceArchitecture_t *v) {
    DEV_ENTER(nvmlDeviceGetArchitecture); NEED(v); *v = u32(RV(architecture)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int *major, int *minor) {
    DEV_ENTER(nvmlDeviceGetCudaComputeCapability); NEED(major); NEED(minor);
    *major = (int)RV(cuda_cc_major); *minor = (int)RV(cuda_cc_minor); return NVML_SUCCESS;
}

static void parse_bus(const char *s, unsigned *dom, unsigned *bus, unsigned *devn) {
    *dom = *bus = *devn = 0;
    sscanf(s, "%x:%x:%x", dom, bus, devn);
}
static void fill_pci(sim_dev_t *d, nvmlPciInfo_t *pci) {
    memset(pci, 0, sizeof(*pci));
    unsigned dom, bus, devn;
    parse_bus(d->pci_bus_id, &dom, &bus, &devn);
    pci->domain = dom; pci->bus = bus; pci->device = devn;
    pci->pciDeviceId = u32(RV(pci_device_id));
    pci->pciSubSystemId = u32(RV(pci_subsystem_id));
    snprintf(pci->busId, sizeof pci->busId, NVML_DEVICE_PCI_BUS_ID_FMT, dom, bus, devn);
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, NVML_DEVICE_PCI_BUS_ID_LEGACY_FMT, dom & 0xffff, bus, devn);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    DEV_ENTER(nvmlDeviceGetPciInfo_v3); NEED(pci); fill_pci(d, pci); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    DEV_ENTER(nvmlDeviceGetPciInfo_v2); NEED(pci); fill_pci(d, pci); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    DEV_ENTER(nvmlDeviceGetPciInfo); NEED(pci); fill_pci(d, pci); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPciInfoExt(nvmlDevice_t device, nvmlPciInfoExt_t *pci) {
    DEV_ENTER(nvmlDeviceGetPciInfoExt); NEED(pci);
    if (pci->version != nvmlPciInfoExt_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    nvmlPciInfo_t p; fill_pci(d, &p);
    pci->domain = p.domain; pci->bus = p.bus; pci->device = p.device;
    pci->pciDeviceId = p.pciDeviceId; pci->pciSubSystemId = p.pciSubSystemId;
    pci->baseClass = 3; pci->subClass = 2;
    memcpy(pci->busId, p.busId, sizeof pci->busId);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Memory, utilization                                                      */
/* ------------------------------------------------------------------------ */
#define MIB 1048576ULL
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *m) {
    DEV_ENTER(nvmlDeviceGetMemoryInfo); NEED(m); SUP(memory_used_mib); SUP(memory_total_mib);
    unsigned long long total = u64(RV(memory_total_mib) * MIB);
    unsigned long long used = u64((RV(memory_used_mib) + RV(memory_reserved_mib)) * MIB);
    if (used > total) used = total;
    m->total = total; m->used = used; m->free = total - used;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *m) {
    DEV_ENTER(nvmlDeviceGetMemoryInfo_v2); NEED(m);
    if (m->version != nvmlMemory_v2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    SUP(memory_used_mib); SUP(memory_total_mib);
    unsigned long long total = u64(RV(memory_total_mib) * MIB);
    unsigned long long reserved = u64(RV(memory_reserved_mib) * MIB);
    unsigned long long used = u64(RV(memory_used_mib) * MIB);
    if (reserved > total) reserved = total;
    if (used > total - reserved) used = total - reserved;
    m->total = total; m->reserved = reserved; m->used = used; m->free = total - reserved - used;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetBAR1MemoryInfo(nvmlDevice_t device, nvmlBAR1Memory_t *m) {
    DEV_ENTER(nvmlDeviceGetBAR1MemoryInfo); NEED(m); SUP(bar1_total_mib);
    m->bar1Total = u64(RV(bar1_total_mib) * MIB); m->bar1Used = u64(RV(bar1_used_mib) * MIB);
    if (m->bar1Used > m->bar1Total) m->bar1Used = m->bar1Total;
    m->bar1Free = m->bar1Total - m->bar1Used;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *u) {
    DEV_ENTER(nvmlDeviceGetUtilizationRates); NEED(u); SUP(utilization_gpu);
    u->gpu = u32(RV(utilization_gpu)); u->memory = d->unsup[R_utilization_memory] ? 0 : u32(RV(utilization_memory));
    return NVML_SUCCESS;
}
#define UTIL_FN(fname, reading)                                                             \
    SIM_EXPORT nvmlReturn_t fname(nvmlDevice_t device, unsigned int *u, unsigned int *period) { \
        DEV_ENTER(fname); NEED(u); NEED(period); SUP(reading);                               \
        *u = u32(RV(reading)); *period = SIM_SAMPLE_PERIOD_US; return NVML_SUCCESS;          \
    }
UTIL_FN(nvmlDeviceGetEncoderUtilization, encoder_util)
UTIL_FN(nvmlDeviceGetDecoderUtilization, decoder_util)
UTIL_FN(nvmlDeviceGetJpgUtilization, jpg_util)
UTIL_FN(nvmlDeviceGetOfaUtilization, ofa_util)

/* ------------------------------------------------------------------------ */
/* Thermal, power, clocks                                                   */
/* ------------------------------------------------------------------------ */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t device, nvmlTemperatureSensors_t s, unsigned int *t) {
    DEV_ENTER(nvmlDeviceGetTemperature); NEED(t);
    if (s != NVML_TEMPERATURE_GPU) return NVML_ERROR_INVALID_ARGUMENT;
    SUP(temperature_c); *t = u32(RV(temperature_c)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureV(nvmlDevice_t device, nvmlTemperature_t *t) {
    DEV_ENTER(nvmlDeviceGetTemperatureV); NEED(t);
    if (t->version != nvmlTemperature_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (t->sensorType != NVML_TEMPERATURE_GPU) return NVML_ERROR_NOT_SUPPORTED;
    SUP(temperature_c); t->temperature = (int)llround(RV(temperature_c)); return NVML_SUCCESS;
}
/* nvml.h (nvmlDeviceGetPowerUsage): "On Ampere (except GA100) or newer GPUs, the API returns
 * power averaged over 1 sec interval. On GA100 and older architectures, instantaneous power is
 * returned"; NVML_FI_DEV_POWER_AVERAGE is "supported on Ampere (except GA100) or newer". GA100
 * parts (A100, A30) have PCI device ids 0x20xx. */
static int power_averaged(const sim_dev_t *d) {
    unsigned arch = u32(RV(architecture));
    if (arch < NVML_DEVICE_ARCH_AMPERE) return 0; /* UNKNOWN: "presumably something newer" */
    return !(arch == NVML_DEVICE_ARCH_AMPERE && (u32(RV(pci_device_id)) >> 24) == 0x20);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t device, unsigned int *p) {
    DEV_ENTER(nvmlDeviceGetPowerUsage); NEED(p); SUP(power_w);
    *p = u32((power_averaged(d) ? RV(power_average_w) : RV(power_w)) * 1000.0); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetEnforcedPowerLimit(nvmlDevice_t device, unsigned int *p) {
    DEV_ENTER(nvmlDeviceGetEnforcedPowerLimit); NEED(p); SUP(power_limit_w); *p = u32(RV(power_limit_w) * 1000.0); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimit(nvmlDevice_t device, unsigned int *p) {
    DEV_ENTER(nvmlDeviceGetPowerManagementLimit); NEED(p); SUP(power_limit_w); *p = u32(RV(power_limit_w) * 1000.0); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementDefaultLimit(nvmlDevice_t device, unsigned int *p) {
    DEV_ENTER(nvmlDeviceGetPowerManagementDefaultLimit); NEED(p); SUP(power_default_limit_w);
    *p = u32(RV(power_default_limit_w) * 1000.0); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerManagementLimitConstraints(nvmlDevice_t device, unsigned int *mn, unsigned int *mx) {
    DEV_ENTER(nvmlDeviceGetPowerManagementLimitConstraints); NEED(mn); NEED(mx); SUP(power_min_limit_w);
    *mn = u32(RV(power_min_limit_w) * 1000.0); *mx = u32(RV(power_max_limit_w) * 1000.0); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t device, unsigned long long *e) {
    DEV_ENTER(nvmlDeviceGetTotalEnergyConsumption); NEED(e); SUP(energy_mj); *e = u64(RV(energy_mj)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerSource(nvmlDevice_t device, nvmlPowerSource_t *s) {
    DEV_ENTER(nvmlDeviceGetPowerSource); NEED(s); SUP(power_source); *s = u32(RV(power_source)); return NVML_SUCCESS;
}

static int clock_reading(nvmlClockType_t t, int max) {
    switch (t) {
    case NVML_CLOCK_GRAPHICS: return max ? R_max_graphics_clock_mhz : R_graphics_clock_mhz;
    case NVML_CLOCK_SM: return max ? R_max_sm_clock_mhz : R_sm_clock_mhz;
    case NVML_CLOCK_MEM: return max ? R_max_memory_clock_mhz : R_memory_clock_mhz;
    case NVML_CLOCK_VIDEO: return max ? R_max_video_clock_mhz : R_video_clock_mhz;
    default: return -1;
    }
}
static nvmlReturn_t read_clock(sim_dev_t *d, nvmlClockType_t t, int max, unsigned int *c) {
    NEED(c);
    int r = clock_reading(t, max);
    if (r < 0) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->unsup[r]) return NVML_ERROR_NOT_SUPPORTED;
    *c = u32(d->val[r]);
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetClockInfo(nvmlDevice_t device, nvmlClockType_t t, unsigned int *c) {
    DEV_ENTER(nvmlDeviceGetClockInfo); return read_clock(d, t, 0, c);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMaxClockInfo(nvmlDevice_t device, nvmlClockType_t t, unsigned int *c) {
    DEV_ENTER(nvmlDeviceGetMaxClockInfo); return read_clock(d, t, 1, c);
}
static nvmlReturn_t app_clock(sim_dev_t *d, nvmlClockType_t t, unsigned int *c) {
    NEED(c);
    if (t == NVML_CLOCK_MEM) { SUP(app_memory_clock_mhz); *c = u32(RV(app_memory_clock_mhz)); return NVML_SUCCESS; }
    if (t == NVML_CLOCK_SM || t == NVML_CLOCK_GRAPHICS) { SUP(app_sm_clock_mhz); *c = u32(RV(app_sm_clock_mhz)); return NVML_SUCCESS; }
    if (t == NVML_CLOCK_VIDEO) return read_clock(d, t, 1, c);
    return NVML_ERROR_INVALID_ARGUMENT;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetApplicationsClock(nvmlDevice_t device, nvmlClockType_t t, unsigned int *c) {
    DEV_ENTER(nvmlDeviceGetApplicationsClock); return app_clock(d, t, c);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetDefaultApplicationsClock(nvmlDevice_t device, nvmlClockType_t t, unsigned int *c) {
    DEV_ENTER(nvmlDeviceGetDefaultApplicationsClock); return app_clock(d, t, c);
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetClock(nvmlDevice_t device, nvmlClockType_t t, nvmlClockId_t id, unsigned int *c) {
    DEV_ENTER(nvmlDeviceGetClock);
    switch (id) {
    case NVML_CLOCK_ID_CURRENT: return read_clock(d, t, 0, c);
    case NVML_CLOCK_ID_APP_CLOCK_TARGET:
    case NVML_CLOCK_ID_APP_CLOCK_DEFAULT: return app_clock(d, t, c);
    case NVML_CLOCK_ID_CUSTOMER_BOOST_MAX: return read_clock(d, t, 1, c);
    default: return NVML_ERROR_INVALID_ARGUMENT;
    }
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed(nvmlDevice_t device, unsigned int *s) {
    DEV_ENTER(nvmlDeviceGetFanSpeed); NEED(s); SUP(fan_percent); *s = u32(RV(fan_percent)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetFanSpeed_v2(nvmlDevice_t device, unsigned int fan, unsigned int *s) {
    DEV_ENTER(nvmlDeviceGetFanSpeed_v2); NEED(s); SUP(fan_percent);
    if (fan >= u32(RV(num_fans))) return NVML_ERROR_INVALID_ARGUMENT;
    *s = u32(RV(fan_percent)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetTargetFanSpeed(nvmlDevice_t device, unsigned int fan, unsigned int *s) {
    DEV_ENTER(nvmlDeviceGetTargetFanSpeed); NEED(s); SUP(fan_percent);
    if (fan >= u32(RV(num_fans))) return NVML_ERROR_INVALID_ARGUMENT;
    *s = u32(RV(fan_percent)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetNumFans(nvmlDevice_t device, unsigned int *n) {
    DEV_ENTER(nvmlDeviceGetNumFans); NEED(n); SUP(fan_percent); *n = u32(RV(num_fans)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPerformanceState(nvmlDevice_t device, nvmlPstates_t *p) {
    DEV_ENTER(nvmlDeviceGetPerformanceState); NEED(p); SUP(pstate); *p = (nvmlPstates_t)u32(RV(pstate)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPowerState(nvmlDevice_t device, nvmlPstates_t *p) {
    DEV_ENTER(nvmlDeviceGetPowerState); NEED(p); SUP(pstate); *p = (nvmlPstates_t)u32(RV(pstate)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksEventReasons(nvmlDevice_t device, unsigned long long *r) {
    DEV_ENTER(nvmlDeviceGetCurrentClocksEventReasons); NEED(r); SUP(clocks_event_reasons); *r = u64(RV(clocks_event_reasons)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetCurrentClocksThrottleReasons(nvmlDevice_t device, unsigned long long *r) {
    DEV_ENTER(nvmlDeviceGetCurrentClocksThrottleReasons); NEED(r); SUP(clocks_event_reasons); *r = u64(RV(clocks_event_reasons)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksEventReasons(nvmlDevice_t device, unsigned long long *r) {
    DEV_ENTER(nvmlDeviceGetSupportedClocksEventReasons); NEED(r); *r = nvmlClocksEventReasonAll; return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetSupportedClocksThrottleReasons(nvmlDevice_t device, unsigned long long *r) {
    DEV_ENTER(nvmlDeviceGetSupportedClocksThrottleReasons); NEED(r); *r = nvmlClocksEventReasonAll; return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetViolationStatus(nvmlDevice_t device, nvmlPerfPolicyType_t t, nvmlViolationTime_t *v) {
    DEV_ENTER(nvmlDeviceGetViolationStatus); NEED(v);
    int r;
    switch (t) {
    case NVML_PERF_POLICY_POWER: r = R_violation_power_ns; break;
    case NVML_PERF_POLICY_THERMAL: r = R_violation_thermal_ns; break;
    case NVML_PERF_POLICY_SYNC_BOOST: r = R_violation_sync_boost_ns; break;
    case NVML_PERF_POLICY_BOARD_LIMIT: r = R_violation_board_limit_ns; break;
    case NVML_PERF_POLICY_LOW_UTILIZATION: r = R_violation_low_util_ns; break;
    case NVML_PERF_POLICY_RELIABILITY: r = R_violation_reliability_ns; break;
    case NVML_PERF_POLICY_TOTAL_APP_CLOCKS: r = R_violation_app_clocks_ns; break;
    case NVML_PERF_POLICY_TOTAL_BASE_CLOCKS: r = R_violation_base_clocks_ns; break;
    default: return NVML_ERROR_INVALID_ARGUMENT;
    }
    if (d->unsup[r]) return NVML_ERROR_NOT_SUPPORTED;
    v->referenceTime = now_us(); v->violationTime = u64(d->val[r]);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* PCIe / modes / misc                                                      */
/* ------------------------------------------------------------------------ */
#define UINT_READ(fname, reading, expr)                                                \
    SIM_EXPORT nvmlReturn_t fname(nvmlDevice_t device, unsigned int *out) {            \
        DEV_ENTER(fname); NEED(out); SUP(reading); *out = (expr); return NVML_SUCCESS; \
    }
UINT_READ(nvmlDeviceGetCurrPcieLinkGeneration, pcie_link_gen, u32(RV(pcie_link_gen)))
UINT_READ(nvmlDeviceGetCurrPcieLinkWidth, pcie_link_width, u32(RV(pcie_link_width)))
UINT_READ(nvmlDeviceGetMaxPcieLinkGeneration, pcie_max_link_gen, u32(RV(pcie_max_link_gen)))
UINT_READ(nvmlDeviceGetGpuMaxPcieLinkGeneration, pcie_max_link_gen, u32(RV(pcie_max_link_gen)))
UINT_READ(nvmlDeviceGetMaxPcieLinkWidth, pcie_max_link_width, u32(RV(pcie_max_link_width)))
UINT_READ(nvmlDeviceGetPcieReplayCounter, pcie_replay_counter, u32(RV(pcie_replay_counter)))
UINT_READ(nvmlDeviceGetNumGpuCores, multiprocessor_count, u32(RV(multiprocessor_count) * 128))
UINT_READ(nvmlDeviceGetMemoryBusWidth, memory_total_mib, 5120)
UINT_READ(nvmlDeviceGetMultiGpuBoard, memory_total_mib, 0)

SIM_EXPORT nvmlReturn_t nvmlDeviceGetPcieSpeed(nvmlDevice_t device, unsigned int *s) {
    DEV_ENTER(nvmlDeviceGetPcieSpeed); NEED(s); SUP(pcie_link_gen);
    static const unsigned sp[] = {0, 2500, 5000, 8000, 16000, 32000, 64000};
    unsigned g = u32(RV(pcie_link_gen)); *s = sp[g < 7 ? g : 6]; return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetPcieThroughput(nvmlDevice_t device, nvmlPcieUtilCounter_t c, unsigned int *v) {
    DEV_ENTER(nvmlDeviceGetPcieThroughput); NEED(v);
    if (c == NVML_PCIE_UTIL_TX_BYTES) { SUP(pcie_tx_kb_s); *v = u32(RV(pcie_tx_kb_s)); return NVML_SUCCESS; }
    if (c == NVML_PCIE_UTIL_RX_BYTES) { SUP(pcie_rx_kb_s); *v = u32(RV(pcie_rx_kb_s)); return NVML_SUCCESS; }
    return NVML_ERROR_INVALID_ARGUMENT;
}
#define ENABLE_READ(fname, reading)                                                      \
    SIM_EXPORT nvmlReturn_t fname(nvmlDevice_t device, nvmlEnableState_t *m) {           \
        DEV_ENTER(fname); NEED(m); SUP(reading);                                         \
        *m = RV(reading) != 0 ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;            \
        return NVML_SUCCESS;                                                             \
    }
ENABLE_READ(nvmlDeviceGetPersistenceMode, persistence_mode)
ENABLE_READ(nvmlDeviceGetDisplayMode, display_mode)
ENABLE_READ(nvmlDeviceGetDisplayActive, display_active)
ENABLE_READ(nvmlDeviceGetRetiredPagesPendingStatus, retired_pages_pending)
SIM_EXPORT nvmlReturn_t nvmlDeviceGetAccountingMode(nvmlDevice_t device, nvmlEnableState_t *m) {
    DEV_ENTER(nvmlDeviceGetAccountingMode); NEED(m); *m = NVML_FEATURE_DISABLED; return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t device, nvmlComputeMode_t *m) {
    DEV_ENTER(nvmlDeviceGetComputeMode); NEED(m); SUP(compute_mode); *m = (nvmlComputeMode_t)u32(RV(compute_mode)); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetEccMode(nvmlDevice_t device, nvmlEnableState_t *cur, nvmlEnableState_t *pend) {
    DEV_ENTER(nvmlDeviceGetEccMode); NEED(cur); NEED(pend); SUP(ecc_mode);
    *cur = *pend = RV(ecc_mode) != 0 ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED; return NVML_SUCCESS;
}
/* MIG mode, instances and MIG handles: nvml_sim_mig.c */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetAttributes_v2(nvmlDevice_t device, nvmlDeviceAttributes_t *a) {
    DEV_ENTER(nvmlDeviceGetAttributes_v2); NEED(a);
    memset(a, 0, sizeof(*a));
    a->multiprocessorCount = u32(RV(multiprocessor_count));
    a->sharedCopyEngineCount = 7; a->sharedDecoderCount = 7; a->sharedJpegCount = 7; a->sharedOfaCount = 1;
    a->memorySizeMB = u64(RV(memory_total_mib));
    mig_attributes(d, a);
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetConfComputeMemSizeInfo(nvmlDevice_t device, nvmlConfComputeMemSizeInfo_t *m) {
    DEV_ENTER(nvmlDeviceGetConfComputeMemSizeInfo); (void)m; return NVML_ERROR_NOT_SUPPORTED;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetDriverModel_v2(nvmlDevice_t device, nvmlDriverModel_t *c, nvmlDriverModel_t *p) {
    DEV_ENTER(nvmlDeviceGetDriverModel_v2); (void)c; (void)p; return NVML_ERROR_NOT_SUPPORTED; /* Windows only */
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, nvmlSamplingType_t t, unsigned long long last,
                                             nvmlValueType_t *vt, unsigned int *count, nvmlSample_t *samples) {
    DEV_ENTER(nvmlDeviceGetSamples); (void)t; (void)last; (void)vt; (void)count; (void)samples;
    return NVML_ERROR_NOT_SUPPORTED;
}

/* ------------------------------------------------------------------------ */
/* ECC, retired pages, remapped rows, NVLink                                */
/* ------------------------------------------------------------------------ */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetTotalEccErrors(nvmlDevice_t device, nvmlMemoryErrorType_t et, nvmlEccCounterType_t ct, unsigned long long *c) {
    DEV_ENTER(nvmlDeviceGetTotalEccErrors); NEED(c); SUP(ecc_mode);
    if (RV(ecc_mode) == 0) return NVML_ERROR_NOT_SUPPORTED;
    /* nvml.h: "Querying volatile errors using device handles is currently not supported" on MIG. */
    if (ct == NVML_VOLATILE_ECC && mig_parent_on(d)) return NVML_ERROR_NOT_SUPPORTED;
    int r;
    if (et == NVML_MEMORY_ERROR_TYPE_CORRECTED) r = ct == NVML_VOLATILE_ECC ? R_ecc_sbe_volatile : R_ecc_sbe_aggregate;
    else if (et == NVML_MEMORY_ERROR_TYPE_UNCORRECTED) r = ct == NVML_VOLATILE_ECC ? R_ecc_dbe_volatile : R_ecc_dbe_aggregate;
    else return NVML_ERROR_INVALID_ARGUMENT;
    if (ct != NVML_VOLATILE_ECC && ct != NVML_AGGREGATE_ECC) return NVML_ERROR_INVALID_ARGUMENT;
    if (d->unsup[r]) return NVML_ERROR_NOT_SUPPORTED;
    *c = u64(d->val[r]);
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetMemoryErrorCounter(nvmlDevice_t device, nvmlMemoryErrorType_t et, nvmlEccCounterType_t ct,
                                                        nvmlMemoryLocation_t loc, unsigned long long *c) {
    DEV_ENTER(nvmlDeviceGetMemoryErrorCounter); NEED(c); SUP(ecc_mode);
    if (RV(ecc_mode) == 0) return NVML_ERROR_NOT_SUPPORTED;
    if (ct == NVML_VOLATILE_ECC && mig_parent_on(d)) return NVML_ERROR_NOT_SUPPORTED; /* see above */
    unsigned mig_index;
    if (mig_index_of(d, &mig_index)) { /* per instance: "only ... non-DRAM uncorrectable volatile errors" */
        if (et != NVML_MEMORY_ERROR_TYPE_UNCORRECTED || ct != NVML_VOLATILE_ECC || loc == NVML_MEMORY_LOCATION_DRAM ||
            loc == NVML_MEMORY_LOCATION_DEVICE_MEMORY)
            return NVML_ERROR_NOT_SUPPORTED;
        *c = loc == NVML_MEMORY_LOCATION_SRAM ? u64(RV(ecc_dbe_volatile)) : 0;
        return NVML_SUCCESS;
    }
    if (loc != NVML_MEMORY_LOCATION_DRAM && loc != NVML_MEMORY_LOCATION_DEVICE_MEMORY) { *c = 0; return NVML_SUCCESS; }
    int sbe = et == NVML_MEMORY_ERROR_TYPE_CORRECTED;
    int vol = ct == NVML_VOLATILE_ECC;
    *c = u64(d->val[sbe ? (vol ? R_ecc_sbe_volatile : R_ecc_sbe_aggregate) : (vol ? R_ecc_dbe_volatile : R_ecc_dbe_aggregate)]);
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetRetiredPages(nvmlDevice_t device, nvmlPageRetirementCause_t cause, unsigned int *count,
                                                  unsigned long long *addresses) {
    DEV_ENTER(nvmlDeviceGetRetiredPages); NEED(count); SUP(retired_pages_sbe);
    int r = cause == NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS ? R_retired_pages_sbe
          : cause == NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR ? R_retired_pages_dbe : -1;
    if (r < 0) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned n = u32(d->val[r]);
    if (*count < n || (n && !addresses)) { *count = n; return n ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS; }
    for (unsigned i = 0; i < n; i++) addresses[i] = 0x100000ULL * (i + 1) + (unsigned)r;
    *count = n;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetRemappedRows(nvmlDevice_t device, unsigned int *corr, unsigned int *unc,
                                                  unsigned int *pending, unsigned int *failure) {
    DEV_ENTER(nvmlDeviceGetRemappedRows); NEED(corr); NEED(unc); NEED(pending); NEED(failure); SUP(remapped_rows_correctable);
    *corr = u32(RV(remapped_rows_correctable)); *unc = u32(RV(remapped_rows_uncorrectable));
    *pending = u32(RV(remapped_rows_pending)) ? 1 : 0; *failure = u32(RV(remapped_rows_failure)) ? 1 : 0;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, nvmlEnableState_t *a) {
    DEV_ENTER(nvmlDeviceGetNvLinkState); NEED(a); SUP(nvlink_links);
    unsigned n = u32(RV(nvlink_links));
    if (n == 0) return NVML_ERROR_NOT_SUPPORTED;
    if (link >= n || link >= SIM_NVLINKS) return NVML_ERROR_INVALID_ARGUMENT;
    *a = d->val[R_nvlink_state_0 + link] != 0 ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
    return NVML_SUCCESS;
}
/* The data-link error counters of one link (nvml.h nvmlNvLinkErrorCounter_t); CRC-data and
 * ECC-data are served as 0 (the scenario models flit CRC, replay and recovery). */
static int nvlink_counter(unsigned counter) {
    switch (counter) {
    case NVML_NVLINK_ERROR_DL_REPLAY: return R_nvlink_replay_errors_0;
    case NVML_NVLINK_ERROR_DL_RECOVERY: return R_nvlink_recovery_errors_0;
    case NVML_NVLINK_ERROR_DL_CRC_FLIT: return R_nvlink_crc_flit_errors_0;
    case NVML_NVLINK_ERROR_DL_CRC_DATA: case NVML_NVLINK_ERROR_DL_ECC_DATA: return -2;
    default: return -1;
    }
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkErrorCounter(nvmlDevice_t device, unsigned int link,
                                                        nvmlNvLinkErrorCounter_t counter, unsigned long long *v) {
    DEV_ENTER(nvmlDeviceGetNvLinkErrorCounter); NEED(v); SUP(nvlink_links);
    unsigned n = u32(RV(nvlink_links));
    if (n == 0) return NVML_ERROR_NOT_SUPPORTED;
    int base = nvlink_counter((unsigned)counter);
    if (link >= n || link >= SIM_NVLINKS || base == -1) return NVML_ERROR_INVALID_ARGUMENT;
    *v = base < 0 ? 0 : u64(d->val[base + (int)link]);
    return NVML_SUCCESS;
}
/* nvml.h nvmlTemperatureThresholds_t: slowdown from the scenario, shutdown 5 C above it, the
 * "throttled below base clock" limit 3 C below it; the rest are not modelled. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetTemperatureThreshold(nvmlDevice_t device, nvmlTemperatureThresholds_t t,
                                                          unsigned int *temp) {
    DEV_ENTER(nvmlDeviceGetTemperatureThreshold); NEED(temp); SUP(temperature_slowdown_c);
    double slowdown = RV(temperature_slowdown_c);
    switch (t) {
    case NVML_TEMPERATURE_THRESHOLD_SLOWDOWN: *temp = u32(slowdown); return NVML_SUCCESS;
    case NVML_TEMPERATURE_THRESHOLD_SHUTDOWN: *temp = u32(slowdown + 5); return NVML_SUCCESS;
    case NVML_TEMPERATURE_THRESHOLD_GPU_MAX: *temp = u32(slowdown - 3); return NVML_SUCCESS;
    default: return (unsigned)t < NVML_TEMPERATURE_THRESHOLD_COUNT ? NVML_ERROR_NOT_SUPPORTED
                                                                 : NVML_ERROR_INVALID_ARGUMENT;
    }
}

/* ------------------------------------------------------------------------ */
/* GPU fabric (NVLink multi-node: GB200/GB300 NVL72, HGX with FM)           */
/* ------------------------------------------------------------------------ */
/* The fabric probe as the driver reports it (nvml.h nvmlGpuFabricInfo_v2_t / _v3_t): the
 * scenario's fabric_* readings.  A device without them (fabric_state unset) answers
 * NOT_SUPPORTED, the one code nvml.h documents.  The cluster UUID is four 32-bit words
 * (big-endian byte order), so a scenario's UUID string round-trips exactly. */
static unsigned fabric_word(sim_dev_t *d, int r) { return d->unsup[r] ? 0u : u32(d->val[r]); }
static void fabric_uuid(sim_dev_t *d, unsigned char out[NVML_GPU_FABRIC_UUID_LEN]) {
    for (int w = 0; w < 4; w++) {
        unsigned v = fabric_word(d, R_fabric_cluster_uuid_0 + w);
        for (int b = 0; b < 4; b++) out[w * 4 + b] = (unsigned char)(v >> (24 - 8 * b));
    }
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t device, nvmlGpuFabricInfoV_t *info) {
    DEV_ENTER(nvmlDeviceGetGpuFabricInfoV); NEED(info); SUP(fabric_state);
    /* v2 and v3 share their first fields; v3 adds healthSummary.  Any other version is the
     * caller's mistake, answered as NVML answers a versioned struct it does not know. */
    unsigned version = info->version;
    if (version != nvmlGpuFabricInfo_v2 && version != nvmlGpuFabricInfo_v3) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    fabric_uuid(d, info->clusterUuid);
    info->status = (nvmlReturn_t)fabric_word(d, R_fabric_status);
    info->cliqueId = fabric_word(d, R_fabric_clique_id);
    info->state = (nvmlGpuFabricState_t)u32(RV(fabric_state));
    info->healthMask = fabric_word(d, R_fabric_health_mask); /* 0: every field NOT_SUPPORTED */
    if (version == nvmlGpuFabricInfo_v3) info->healthSummary = (unsigned char)fabric_word(d, R_fabric_health_summary);
    return NVML_SUCCESS;
}
/* The unversioned original (DEPRECATED(13.0)): no version, no health. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfo(nvmlDevice_t device, nvmlGpuFabricInfo_t *info) {
    DEV_ENTER(nvmlDeviceGetGpuFabricInfo); NEED(info); SUP(fabric_state);
    fabric_uuid(d, info->clusterUuid);
    info->status = (nvmlReturn_t)fabric_word(d, R_fabric_status);
    info->cliqueId = fabric_word(d, R_fabric_clique_id);
    info->state = (nvmlGpuFabricState_t)u32(RV(fabric_state));
    return NVML_SUCCESS;
}

/* nvml.h: seconds since the driver initialised the GPU; restarts on driver reload and GPU reset. */
SIM_EXPORT nvmlReturn_t nvmlDeviceGetGpuUptime_v1(nvmlDevice_t device, nvmlGpuUptime_v1_t *up) {
    DEV_ENTER(nvmlDeviceGetGpuUptime_v1); NEED(up);
    unsigned gi;
    int idx = dev_place(d, &gi); /* "For MIG device handles, the parent GPU uptime is returned." */
    uint64_t since = __atomic_load_n(&g_st->chaos.device_up_us[idx], __ATOMIC_ACQUIRE), now = now_us();
    up->uptime = now > since ? (unsigned int)((now - since) / 1000000ULL) : 0;
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Field values                                                             */
/* ------------------------------------------------------------------------ */
static void fv_ull(nvmlFieldValue_t *v, sim_dev_t *d, int r) {
    if (d->unsup[r]) { v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; return; }
    v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG; v->value.ullVal = u64(d->val[r]); v->nvmlReturn = NVML_SUCCESS;
}
static void fv_uint(nvmlFieldValue_t *v, sim_dev_t *d, int r, double scale) {
    if (d->unsup[r]) { v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; return; }
    v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT; v->value.uiVal = u32(d->val[r] * scale); v->nvmlReturn = NVML_SUCCESS;
}
/* NVLink per-link fields: the link in scopeId (nvml.h "Link ID needs to be specified in the
 * scopeId field"); ``total``: summed over the device's links. State: NVML_NVLINK_STATE_ACTIVE (1)
 * or NVML_NVLINK_STATE_INACTIVE (0). A link the device does not have: INVALID_ARGUMENT. */
static void fv_nvlink(nvmlFieldValue_t *v, sim_dev_t *d, int base, int total) {
    unsigned n = u32(RV(nvlink_links));
    if (n > SIM_NVLINKS) n = SIM_NVLINKS;
    if (d->unsup[R_nvlink_links] || n == 0) { v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; return; }
    if (total) {
        double sum = 0;
        for (unsigned i = 0; i < n; i++) sum += d->val[base + (int)i];
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG; v->value.ullVal = u64(sum); v->nvmlReturn = NVML_SUCCESS;
        return;
    }
    if (v->scopeId >= n) { v->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT; return; }
    if (base == R_nvlink_speed_mbps || base == R_nvlink_version) {
        /* one value for every link of the device; an inactive link runs at no speed */
        if (d->unsup[base]) { v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; return; }
        int up = d->val[R_nvlink_state_0 + (int)v->scopeId] != 0;
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        v->value.uiVal = base == R_nvlink_speed_mbps && !up ? 0u : u32(d->val[base]);
    } else if (base == R_nvlink_state_0) {
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_INT;
        v->value.uiVal = d->val[base + (int)v->scopeId] != 0 ? NVML_NVLINK_STATE_ACTIVE : NVML_NVLINK_STATE_INACTIVE;
    } else {
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG; v->value.ullVal = u64(d->val[base + (int)v->scopeId]);
    }
    v->nvmlReturn = NVML_SUCCESS;
}
/* nvml.h: PCIe byte counters "can be wrapped"; they wrap at pcie_counter_bits (scenario). */
static void fv_wrapped(nvmlFieldValue_t *v, sim_dev_t *d, int r) {
    fv_ull(v, d, r);
    unsigned bits = u32(RV(pcie_counter_bits));
    if (v->nvmlReturn == NVML_SUCCESS && bits > 0 && bits < 64) v->value.ullVal &= (1ULL << bits) - 1;
}
static void fill_field(sim_dev_t *d, nvmlFieldValue_t *v) {
    v->latencyUsec = 0;
    /* nvml.h: "CPU Timestamp of this value": when the driver took it; field_age_ms makes the
     * node serve values the driver cached that long ago. */
    v->timestamp = (long long)now_us() - (long long)(RV(field_age_ms) * 1000.0);
    v->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
    if (mig_field_unsupported(d, v->fieldId)) return;
    v->value.ullVal = 0;
    switch (v->fieldId) {
    case NVML_FI_DEV_GPU_TEMP:
        if (d->unsup[R_temperature_c]) return;
        v->valueType = NVML_VALUE_TYPE_DOUBLE; v->value.dVal = RV(temperature_c); v->nvmlReturn = NVML_SUCCESS; return;
    case NVML_FI_DEV_MEMORY_TEMP: fv_uint(v, d, R_memory_temperature_c, 1); return;
    case NVML_FI_DEV_POWER_INSTANT: fv_uint(v, d, R_power_w, 1000.0); return;
    case NVML_FI_DEV_POWER_AVERAGE:
        if (d->unsup[R_power_w] || !power_averaged(d)) return; /* NOT_SUPPORTED */
        fv_uint(v, d, R_power_average_w, 1000.0); return;
    case NVML_FI_DEV_TOTAL_ENERGY_CONSUMPTION: fv_ull(v, d, R_energy_mj); return;
    case NVML_FI_DEV_PCIE_COUNT_TX_BYTES: fv_wrapped(v, d, R_pcie_tx_bytes); return;
    case NVML_FI_DEV_PCIE_COUNT_RX_BYTES: fv_wrapped(v, d, R_pcie_rx_bytes); return;
    case NVML_FI_DEV_PCIE_REPLAY_ROLLOVER_COUNTER: fv_ull(v, d, R_pcie_replay_rollover); return;
    case NVML_FI_DEV_PCIE_REPLAY_COUNTER: fv_ull(v, d, R_pcie_replay_counter); return;
    case NVML_FI_DEV_ECC_SBE_VOL_TOTAL: if (RV(ecc_mode) != 0) fv_ull(v, d, R_ecc_sbe_volatile); return;
    case NVML_FI_DEV_ECC_DBE_VOL_TOTAL: if (RV(ecc_mode) != 0) fv_ull(v, d, R_ecc_dbe_volatile); return;
    case NVML_FI_DEV_ECC_SBE_AGG_TOTAL: if (RV(ecc_mode) != 0) fv_ull(v, d, R_ecc_sbe_aggregate); return;
    case NVML_FI_DEV_ECC_DBE_AGG_TOTAL: if (RV(ecc_mode) != 0) fv_ull(v, d, R_ecc_dbe_aggregate); return;
    case NVML_FI_DEV_RETIRED_SBE: fv_ull(v, d, R_retired_pages_sbe); return;
    case NVML_FI_DEV_RETIRED_DBE: fv_ull(v, d, R_retired_pages_dbe); return;
    case NVML_FI_DEV_RETIRED_PENDING: fv_ull(v, d, R_retired_pages_pending); return;
    case NVML_FI_DEV_REMAPPED_COR: fv_uint(v, d, R_remapped_rows_correctable, 1); return;
    case NVML_FI_DEV_REMAPPED_UNC: fv_uint(v, d, R_remapped_rows_uncorrectable, 1); return;
    case NVML_FI_DEV_REMAPPED_PENDING: fv_uint(v, d, R_remapped_rows_pending, 1); return;
    case NVML_FI_DEV_REMAPPED_FAILURE: fv_uint(v, d, R_remapped_rows_failure, 1); return;
    case NVML_FI_DEV_PERF_POLICY_POWER: fv_ull(v, d, R_violation_power_ns); return;
    case NVML_FI_DEV_PERF_POLICY_THERMAL: fv_ull(v, d, R_violation_thermal_ns); return;
    case NVML_FI_DEV_PERF_POLICY_SYNC_BOOST: fv_ull(v, d, R_violation_sync_boost_ns); return;
    case NVML_FI_DEV_PERF_POLICY_BOARD_LIMIT: fv_ull(v, d, R_violation_board_limit_ns); return;
    case NVML_FI_DEV_PERF_POLICY_LOW_UTILIZATION: fv_ull(v, d, R_violation_low_util_ns); return;
    case NVML_FI_DEV_PERF_POLICY_RELIABILITY: fv_ull(v, d, R_violation_reliability_ns); return;
    case NVML_FI_DEV_PERF_POLICY_TOTAL_APP_CLOCKS: fv_ull(v, d, R_violation_app_clocks_ns); return;
    case NVML_FI_DEV_PERF_POLICY_TOTAL_BASE_CLOCKS: fv_ull(v, d, R_violation_base_clocks_ns); return;
    case NVML_FI_DEV_CLOCKS_EVENT_REASON_SW_THERM_SLOWDOWN: fv_ull(v, d, R_violation_sw_thermal_ns); return;
    case NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_THERM_SLOWDOWN: fv_ull(v, d, R_violation_hw_thermal_ns); return;
    case NVML_FI_DEV_CLOCKS_EVENT_REASON_HW_POWER_BRAKE_SLOWDOWN: fv_ull(v, d, R_violation_hw_power_brake_ns); return;
    case NVML_FI_DEV_NVLINK_LINK_COUNT: fv_uint(v, d, R_nvlink_links, 1); return;
    case NVML_FI_DEV_NVLINK_GET_STATE: fv_nvlink(v, d, R_nvlink_state_0, 0); return;
    case NVML_FI_DEV_NVLINK_GET_SPEED: fv_nvlink(v, d, R_nvlink_speed_mbps, 0); return;
    case NVML_FI_DEV_NVLINK_GET_VERSION: fv_nvlink(v, d, R_nvlink_version, 0); return;
    case NVML_FI_DEV_NVLINK_SPEED_MBPS_COMMON:
        if (RV(nvlink_links) > 0) fv_uint(v, d, R_nvlink_speed_mbps, 1);
        return;
    case NVML_FI_DEV_NVLINK_ERROR_DL_CRC: fv_nvlink(v, d, R_nvlink_crc_flit_errors_0, 0); return;
    case NVML_FI_DEV_NVLINK_ERROR_DL_REPLAY: fv_nvlink(v, d, R_nvlink_replay_errors_0, 0); return;
    case NVML_FI_DEV_NVLINK_ERROR_DL_RECOVERY: fv_nvlink(v, d, R_nvlink_recovery_errors_0, 0); return;
    case NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL: fv_nvlink(v, d, R_nvlink_crc_flit_errors_0, 1); return;
    case NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL: fv_nvlink(v, d, R_nvlink_replay_errors_0, 1); return;
    case NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL: fv_nvlink(v, d, R_nvlink_recovery_errors_0, 1); return;
    /* nvml.h: the action a nvmlEventTypeGpuRecoveryAction event announces (its eventData is 0) */
    case NVML_FI_DEV_GET_GPU_RECOVERY_ACTION: fv_uint(v, d, R_recovery_action, 1); return;
    case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX:
    case NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX:
    case NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX:
    case NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX: {
        int rx = v->fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX || v->fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX;
        int raw = v->fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX || v->fieldId == NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX;
        int r = rx ? R_nvlink_rx_kib : R_nvlink_tx_kib;
        unsigned links = u32(RV(nvlink_links));
        if (d->unsup[r] || d->unsup[R_nvlink_links] || links == 0) return;
        double total = d->val[r] * (raw ? 1.08 : 1.0);
        double out;
        if (v->scopeId == UINT_MAX) out = total;           /* aggregate over all links */
        else if (v->scopeId < links) out = total / links;  /* traffic spread evenly */
        else { v->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT; return; }
        v->valueType = NVML_VALUE_TYPE_UNSIGNED_LONG_LONG; v->value.ullVal = u64(out); v->nvmlReturn = NVML_SUCCESS;
        return;
    }
    default: return;
    }
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetFieldValues(nvmlDevice_t device, int n, nvmlFieldValue_t *values) {
    DEV_ENTER(nvmlDeviceGetFieldValues);
    if (n < 0 || (n > 0 && !values)) return NVML_ERROR_INVALID_ARGUMENT;
    unsigned gi;
    int idx = dev_place(d, &gi); /* chaos per physical GPU, MIG handles included */
    for (int i = 0; i < n; i++) {
        fill_field(d, &values[i]);
        nvmlReturn_t f = chaos_field(&g_st->chaos, FN_nvmlDeviceGetFieldValues, idx, values[i].fieldId);
        if (f != NVML_SUCCESS) { values[i].nvmlReturn = f; values[i].value.ullVal = 0; }
    }
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Processes                                                                */
/* ------------------------------------------------------------------------ */
typedef struct {
    uint32_t pid, gi, ci; uint64_t mem; double sm, memu, enc, dec; uint64_t ts;
    sim_sample_t older[SIM_PROC_OLDER];
} proc_snap_t;

/* Consistent snapshot of the processes on device idx with the given kind bit; on compute
 * instance (gi, ci) only, unless gi is SIM_MIG_NONE (the parent's handle lists every
 * instance's processes): a MIG device handle "maps to a MIG compute instance" (nvml.h). */
static unsigned snapshot_procs(int idx, unsigned gi, unsigned ci, uint32_t kind_bit, proc_snap_t *out, unsigned cap) {
    unsigned n;
    for (;;) {
        uint32_t g0 = __atomic_load_n(&g_st->proc_gen, __ATOMIC_ACQUIRE);
        if (g0 & 1) { sched_yield(); continue; }
        n = 0;
        for (int i = 0; i < SIM_MAX_PROC; i++) {
            sim_proc_t *p = &g_st->proc[i];
            if (p->dev != idx || !(p->kinds & kind_bit)) continue;
            if (gi != SIM_MIG_NONE && (p->gi != gi || p->ci != ci)) continue;
            if (n < cap) {
                out[n].pid = p->pid; out[n].gi = p->gi; out[n].ci = p->ci; out[n].mem = p->used_mem_bytes; out[n].sm = p->sm_util;
                out[n].memu = p->mem_util; out[n].enc = p->enc_util; out[n].dec = p->dec_util; out[n].ts = p->sample_ts_us;
                memcpy(out[n].older, p->older, sizeof p->older);
            }
            n++;
        }
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&g_st->proc_gen, __ATOMIC_ACQUIRE) == g0) return n;
    }
}

static proc_snap_t *alloc_snap(void) { return (proc_snap_t *)malloc(sizeof(proc_snap_t) * SIM_MAX_PROC); }

static nvmlReturn_t list_procs(sim_dev_t *d, uint32_t kind_bit, unsigned int *count, void *infos, int ver) {
    NEED(count);
    unsigned gi, ci;
    int idx = dev_place_ci(d, &gi, &ci);
    proc_snap_t *s = alloc_snap();
    if (!s) return NVML_ERROR_MEMORY;
    unsigned n = snapshot_procs(idx, gi, ci, kind_bit, s, SIM_MAX_PROC);
    if (n > SIM_MAX_PROC) n = SIM_MAX_PROC;
    if (*count < n || (n > 0 && !infos)) {
        *count = n;
        free(s);
        return n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (unsigned i = 0; i < n; i++) {
        if (ver == 1) {
            nvmlProcessInfo_v1_t *p = (nvmlProcessInfo_v1_t *)infos + i;
            p->pid = s[i].pid; p->usedGpuMemory = s[i].mem;
        } else {
            nvmlProcessInfo_t *p = (nvmlProcessInfo_t *)infos + i;
            p->pid = s[i].pid; p->usedGpuMemory = s[i].mem; p->gpuInstanceId = s[i].gi;
            p->computeInstanceId = s[i].ci;
        }
    }
    *count = n;
    free(s);
    return NVML_SUCCESS;
}
#define PROC_FN(fname, bit, ver, T)                                                             \
    SIM_EXPORT nvmlReturn_t fname(nvmlDevice_t device, unsigned int *count, T *infos) {         \
        DEV_ENTER(fname); return list_procs(d, bit, count, infos, ver);                        \
    }
PROC_FN(nvmlDeviceGetComputeRunningProcesses_v3, 1u, 3, nvmlProcessInfo_t)
PROC_FN(nvmlDeviceGetComputeRunningProcesses_v2, 1u, 2, nvmlProcessInfo_v2_t)
PROC_FN(nvmlDeviceGetComputeRunningProcesses, 1u, 1, nvmlProcessInfo_v1_t)
PROC_FN(nvmlDeviceGetGraphicsRunningProcesses_v3, 2u, 3, nvmlProcessInfo_t)
PROC_FN(nvmlDeviceGetGraphicsRunningProcesses_v2, 2u, 2, nvmlProcessInfo_v2_t)
PROC_FN(nvmlDeviceGetGraphicsRunningProcesses, 2u, 1, nvmlProcessInfo_v1_t)
PROC_FN(nvmlDeviceGetMPSComputeRunningProcesses_v3, 4u, 3, nvmlProcessInfo_t)
PROC_FN(nvmlDeviceGetMPSComputeRunningProcesses_v2, 4u, 2, nvmlProcessInfo_v2_t)
PROC_FN(nvmlDeviceGetMPSComputeRunningProcesses, 4u, 1, nvmlProcessInfo_v1_t)

SIM_EXPORT nvmlReturn_t nvmlDeviceGetRunningProcessDetailList(nvmlDevice_t device, nvmlProcessDetailList_t *pl) {
    DEV_ENTER(nvmlDeviceGetRunningProcessDetailList); NEED(pl);
    if (pl->version != nvmlProcessDetailList_v1) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    uint32_t bit = pl->mode == NVML_PROCESS_MODE_COMPUTE ? 1u : pl->mode == NVML_PROCESS_MODE_GRAPHICS ? 2u
                 : pl->mode == NVML_PROCESS_MODE_MPS ? 4u : 7u;
    proc_snap_t *s = alloc_snap();
    if (!s) return NVML_ERROR_MEMORY;
    unsigned gi, ci;
    int idx = dev_place_ci(d, &gi, &ci);
    unsigned n = snapshot_procs(idx, gi, ci, bit, s, SIM_MAX_PROC);
    if (n > SIM_MAX_PROC) n = SIM_MAX_PROC;
    if (pl->numProcArrayEntries < n || (n && !pl->procArray)) {
        pl->numProcArrayEntries = n; free(s);
        return n ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
    }
    for (unsigned i = 0; i < n; i++) {
        nvmlProcessDetail_v1_t *p = &pl->procArray[i];
        p->pid = s[i].pid; p->usedGpuMemory = s[i].mem; p->gpuInstanceId = s[i].gi;
        p->computeInstanceId = s[i].ci; p->usedGpuCcProtectedMemory = 0;
    }
    pl->numProcArrayEntries = n;
    free(s);
    return NVML_SUCCESS;
}

/* nvml.h: "One utilization sample structure is returned per process running, that had some
 * non-zero utilization during the last sample period" -- an idle process has no sample; a
 * process may have several (its current and previous one), returned in no promised order
 * (shuffled here, so a client that takes the last one in the array is caught); only samples
 * newer than lastSeenTimeStamp; NVML_ERROR_NOT_FOUND when there are none. */
static int sample_active(double sm, double mem, double enc, double dec) {
    return u32(sm) > 0 || u32(mem) > 0 || u32(enc) > 0 || u32(dec) > 0;
}
static uint64_t xorshift64(uint64_t *x) {
    *x ^= *x << 13; *x ^= *x >> 7; *x ^= *x << 17;
    return *x;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetProcessUtilization(nvmlDevice_t device, nvmlProcessUtilizationSample_t *u,
                                                        unsigned int *count, unsigned long long last) {
    DEV_ENTER(nvmlDeviceGetProcessUtilization); NEED(count);
    proc_snap_t *s = alloc_snap();
    if (!s) return NVML_ERROR_MEMORY;
    unsigned n = snapshot_procs((int)(d - g_st->dev), SIM_MIG_NONE, SIM_MIG_NONE, 7u, s, SIM_MAX_PROC);
    if (n > SIM_MAX_PROC) n = SIM_MAX_PROC;
    nvmlProcessUtilizationSample_t *out =
        (nvmlProcessUtilizationSample_t *)malloc(sizeof(*out) * (SIM_PROC_OLDER + 1) * (n ? n : 1));
    if (!out) { free(s); return NVML_ERROR_MEMORY; }
    unsigned m = 0;
    for (unsigned i = 0; i < n; i++) {
        for (int k = 0; k < SIM_PROC_OLDER; k++) {
            const sim_sample_t *o = &s[i].older[k];
            if (o->ts_us > last && o->ts_us < s[i].ts && sample_active(o->sm, o->mem, o->enc, o->dec)) {
                out[m++] = (nvmlProcessUtilizationSample_t){s[i].pid, o->ts_us, u32(o->sm), u32(o->mem),
                                                            u32(o->enc), u32(o->dec)};
            }
        }
        if (s[i].ts > last && sample_active(s[i].sm, s[i].memu, s[i].enc, s[i].dec)) {
            out[m++] = (nvmlProcessUtilizationSample_t){s[i].pid, s[i].ts, u32(s[i].sm), u32(s[i].memu),
                                                        u32(s[i].enc), u32(s[i].dec)};
        }
    }
    free(s);
    if (m == 0) { *count = 0; free(out); return NVML_ERROR_NOT_FOUND; }
    if (!u || *count < m) { *count = m; free(out); return NVML_ERROR_INSUFFICIENT_SIZE; }
    uint64_t x = now_us() | 1;
    for (unsigned i = m - 1; i > 0; i--) {
        unsigned j = (unsigned)(xorshift64(&x) % (i + 1));
        nvmlProcessUtilizationSample_t t = out[i]; out[i] = out[j]; out[j] = t;
    }
    memcpy(u, out, sizeof(*out) * m);
    *count = m;
    free(out);
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* GPM (Hopper and newer)                                                   */
/* ------------------------------------------------------------------------ */
#define SIM_GPM_REFRESH_US 100000ULL /* nvml.h: GPM's "internal sample refresh rate", 100 ms */
SIM_EXPORT nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *s) {
    DEV_ENTER(nvmlGpmQueryDeviceSupport); NEED(s);
    if (s->version != NVML_GPM_SUPPORT_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    s->isSupportedDevice = RV(gpm_supported) != 0 ? 1 : 0;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *s) {
    SYS_ENTER(nvmlGpmSampleAlloc); NEED(s);
    *s = (nvmlGpmSample_t)calloc(1, sizeof(struct nvmlGpmSample_st));
    if (!*s) return NVML_ERROR_MEMORY;
    (*s)->dev = -1;
    (*s)->gi = SIM_MIG_NONE;
    return NVML_SUCCESS;
}
/* The prologue of a call that names no device handle but belongs to one GPU (a GPM sample's,
 * a one-GPU event set's): counted and faulted as that GPU's call, so `chaos --devices N` and
 * `fail --device N` reach it on N and nowhere else (dev < 0: a call without a device). */
static nvmlReturn_t owned_enter(int fn, int dev) {
    count_call(fn, dev);
    if (!g_st || g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    return sys_faults(fn, dev);
}
SIM_EXPORT nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t s) {
    nvmlReturn_t r = owned_enter(FN_nvmlGpmSampleFree, s ? s->dev : -1);
    if (r != NVML_SUCCESS) return r;
    NEED(s); free(s); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t s) {
    DEV_ENTER(nvmlGpmSampleGet); NEED(s);
    if (RV(gpm_supported) == 0) return NVML_ERROR_NOT_SUPPORTED;
    /* nvml.h: "This API supports the device handle and MIG device handle" -- a MIG device's
     * sample is its compute instance's own activity (keyed apart from GPU-instance samples). */
    unsigned gi, ci;
    int idx = dev_place_ci(d, &gi, &ci);
    int mig = gi != SIM_MIG_NONE;
    s->dev = idx; s->gi = mig ? 0x80000000u | (gi << 8) | (ci & 0xFFu) : SIM_MIG_NONE; s->ts_us = now_us();
    s->sm = RV(sm_active); s->occ = RV(sm_occupancy); s->tensor = RV(tensor_active); s->dram = RV(dram_active);
    s->fp16 = RV(fp16_active); s->fp32 = RV(fp32_active); s->fp64 = RV(fp64_active);
    s->gfx = mig ? RV(sm_active) : RV(utilization_gpu);
    s->pcie_tx = mig ? 0 : RV(pcie_tx_kb_s) / 1024.0; s->pcie_rx = mig ? 0 : RV(pcie_rx_kb_s) / 1024.0;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *mg) {
    /* The samples' GPU owns the call (a MIG instance's samples: its parent's). */
    int owner = mg && mg->sample1 && mg->sample2 && mg->sample1->dev == mg->sample2->dev ? mg->sample1->dev : -1;
    nvmlReturn_t r = owned_enter(FN_nvmlGpmMetricsGet, owner);
    if (r != NVML_SUCCESS) return r;
    NEED(mg);
    if (mg->version != NVML_GPM_METRICS_GET_VERSION) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    if (!mg->sample1 || !mg->sample2 || mg->numMetrics > NVML_GPM_METRIC_MAX) return NVML_ERROR_INVALID_ARGUMENT;
    struct nvmlGpmSample_st *a = mg->sample1, *b = mg->sample2;
    if (a->dev < 0 || a->dev != b->dev || a->gi != b->gi) return NVML_ERROR_INVALID_ARGUMENT;
    sim_dev_t *d = &g_st->dev[b->dev];
    if (__atomic_load_n(&d->lost, __ATOMIC_ACQUIRE)) return NVML_ERROR_GPU_IS_LOST;
    /* nvml.h: the two samples "should be greater than 100ms" apart "due to the internal sample
     * refresh rate": closer ones may hold the same refresh, nothing to divide by (NaN; DCGM's
     * DcgmGpmManager blanks a NaN value). */
    uint64_t apart = a->ts_us > b->ts_us ? a->ts_us - b->ts_us : b->ts_us - a->ts_us;
    int stale = apart <= SIM_GPM_REFRESH_US;
    for (unsigned i = 0; i < mg->numMetrics; i++) {
        nvmlGpmMetric_t *m = &mg->metrics[i];
        m->nvmlReturn = NVML_SUCCESS;
        m->metricInfo.shortName = m->metricInfo.longName = m->metricInfo.unit = NULL;
        if (stale) { m->value = NAN; continue; }
        switch (m->metricId) {
        case NVML_GPM_METRIC_GRAPHICS_UTIL: m->value = (a->gfx + b->gfx) / 2; break;
        case NVML_GPM_METRIC_SM_UTIL: m->value = (a->sm + b->sm) / 2; break;
        case NVML_GPM_METRIC_SM_OCCUPANCY: m->value = (a->occ + b->occ) / 2; break;
        case NVML_GPM_METRIC_ANY_TENSOR_UTIL:
        case NVML_GPM_METRIC_HMMA_TENSOR_UTIL: m->value = (a->tensor + b->tensor) / 2; break;
        case NVML_GPM_METRIC_DFMA_TENSOR_UTIL:
        case NVML_GPM_METRIC_IMMA_TENSOR_UTIL: m->value = 0; break;
        case NVML_GPM_METRIC_DRAM_BW_UTIL: m->value = (a->dram + b->dram) / 2; break;
        case NVML_GPM_METRIC_FP16_UTIL: m->value = (a->fp16 + b->fp16) / 2; break;
        case NVML_GPM_METRIC_FP32_UTIL: m->value = (a->fp32 + b->fp32) / 2; break;
        case NVML_GPM_METRIC_FP64_UTIL: m->value = (a->fp64 + b->fp64) / 2; break;
        case NVML_GPM_METRIC_PCIE_TX_PER_SEC: m->value = (a->pcie_tx + b->pcie_tx) / 2; break;
        case NVML_GPM_METRIC_PCIE_RX_PER_SEC: m->value = (a->pcie_rx + b->pcie_rx) / 2; break;
        default: m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED; m->value = 0; break;
        }
    }
    return NVML_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Events                                                                   */
/* ------------------------------------------------------------------------ */
static uint64_t supported_events(sim_dev_t *d) {
    uint64_t m = d->supported_events;
    if (RV(ecc_mode) == 0) m &= ~(uint64_t)(nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError);
    return m;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *t) {
    DEV_ENTER(nvmlDeviceGetSupportedEventTypes); NEED(t); *t = supported_events(d); return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set) {
    SYS_ENTER(nvmlEventSetCreate); NEED(set);
    struct nvmlEventSet_st *s = (struct nvmlEventSet_st *)calloc(1, sizeof(*s));
    if (!s) return NVML_ERROR_MEMORY;
    s->last_seq = __atomic_load_n(&g_st->ev_seq, __ATOMIC_ACQUIRE);
    s->driver_gen = g_client_driver_gen;
    *set = s;
    return NVML_SUCCESS;
}
SIM_EXPORT nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long types, nvmlEventSet_t set) {
    DEV_ENTER(nvmlDeviceRegisterEvents); NEED(set);
    uint64_t sup = supported_events(d);
    if (types & ~sup) return NVML_ERROR_NOT_SUPPORTED;
    __atomic_fetch_or(&set->mask[d - g_st->dev], types, __ATOMIC_RELEASE);
    return NVML_SUCCESS;
}

/* The one GPU a set's registrations are on, else -1 (none yet, or several GPUs). */
static int event_set_owner(const struct nvmlEventSet_st *set) {
    int owner = -1;
    for (int i = 0; set && i < SIM_MAX_DEV; i++) {
        if (!__atomic_load_n(&set->mask[i], __ATOMIC_ACQUIRE)) continue;
        if (owner >= 0) return -1;
        owner = i;
    }
    return owner;
}
static nvmlReturn_t event_wait(int fn, nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    if (!g_st || g_init_count <= 0) return NVML_ERROR_UNINITIALIZED;
    nvmlReturn_t f = sys_faults(fn, event_set_owner(set)); /* a one-GPU set's faults are its GPU's */
    if (f != NVML_SUCCESS) return f;
    NEED(set); NEED(data);
    if (set->driver_gen != g_client_driver_gen) return NVML_ERROR_UNKNOWN; /* its registrations died with the driver */
    uint64_t deadline = mono_ms() + timeoutms;
    for (;;) {
        uint32_t fw = __atomic_load_n(&g_st->ev_futex, __ATOMIC_ACQUIRE);
        uint64_t cur = __atomic_load_n(&g_st->ev_seq, __ATOMIC_ACQUIRE);
        uint64_t s = ring_first(set->last_seq, cur);
        const sim_event_t *e;
        while ((e = ring_next(&s, cur)) != NULL) {
            int dv = e->dev;
            uint64_t ty = e->type, dt = e->data;
            if (dv >= 0 && dv < SIM_MAX_DEV && (set->mask[dv] & ty)) {
                set->last_seq = s;
                data->device = &g_handles[dv];
                data->eventType = ty;
                data->eventData = ty == nvmlEventTypeXidCriticalError ? dt : 0;
                data->gpuInstanceId = e->gi;
                data->computeInstanceId = e->ci;
                return NVML_SUCCESS;
            }
        }
        set->last_seq = s;
        uint64_t now = mono_ms();
        if (now >= deadline) return NVML_ERROR_TIMEOUT;
        futex_wait(&g_st->ev_futex, fw, (long)(deadline - now));
    }
}
SIM_EXPORT nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    count_call(FN_nvmlEventSetWait_v2, event_set_owner(set)); return event_wait(FN_nvmlEventSetWait_v2, set, data, timeoutms);
}
SIM_EXPORT nvmlReturn_t nvmlEventSetWait(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms) {
    count_call(FN_nvmlEventSetWait, event_set_owner(set)); return event_wait(FN_nvmlEventSetWait, set, data, timeoutms);
}
SIM_EXPORT nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set) {
    nvmlReturn_t r = owned_enter(FN_nvmlEventSetFree, event_set_owner(set));
    if (r != NVML_SUCCESS) return r;
    NEED(set); free(set); return NVML_SUCCESS;
}

/* ======================================================================== */
/* Control API for the node daemon (simnode_*).  Returns 0 on success,      */
/* negative on bad arguments.                                               */
/* ======================================================================== */
/* The rest (setters, process removal, counters) is in simcore_state.h. */
SIM_EXPORT int simnode_max_devices(void) { return SIM_MAX_DEV; }
SIM_EXPORT int simnode_function_count(void) { return FN_COUNT; }
SIM_EXPORT const char *simnode_function_name(int i) { return i >= 0 && i < FN_COUNT ? g_func_names[i] : NULL; }
SIM_EXPORT int simnode_reading_id(const char *name) {
    for (int i = 0; i < R_COUNT; i++) if (strcmp(name, g_reading_names[i]) == 0) return i;
    return -1;
}
SIM_EXPORT int simnode_function_id(const char *name) {
    for (int i = 0; i < FN_COUNT; i++) if (strcmp(name, g_func_names[i]) == 0) return i;
    return -1;
}

SIM_EXPORT int simnode_create(const char *path, int n_devices) {
    if (n_devices < 0 || n_devices > SIM_MAX_DEV) return -1;
    g_ctl = map_state(path, 1, (unsigned)n_devices);
    if (!g_ctl) return -2;
    for (int i = 0; i < n_devices; i++) {
        g_ctl->dev[i].supported_events = nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError |
            nvmlEventTypePState | nvmlEventTypeXidCriticalError | nvmlEventTypeClock |
            nvmlEventTypePowerSourceChange | nvmlEventTypeGpuUnavailableError | nvmlEventTypeGpuRecoveryAction |
            nvmlEventMigConfigChange;
        g_ctl->chaos.device_up_us[i] = now_us();
    }
    return 0;
}
SIM_EXPORT int simnode_set_system(const char *driver, const char *nvml, int cuda) {
    if (!g_ctl) return -1;
    snprintf(g_ctl->driver_version, SIM_STR, "%s", driver);
    snprintf(g_ctl->nvml_version, SIM_STR, "%s", nvml);
    g_ctl->cuda_driver_version = cuda;
    return 0;
}
SIM_EXPORT int simnode_set_string(int dev, const char *key, const char *value) {
    sim_dev_t *d = ctl_dev(dev);
    if (!d || !key || !value) return -1;
    char *dst = strcmp(key, "name") == 0 ? d->name : strcmp(key, "uuid") == 0 ? d->uuid
              : strcmp(key, "serial") == 0 ? d->serial : strcmp(key, "pci_bus_id") == 0 ? d->pci_bus_id
              : strcmp(key, "vbios") == 0 ? d->vbios : strcmp(key, "board_part") == 0 ? d->board_part : NULL;
    if (!dst) return -2;
    snprintf(dst, SIM_STR, "%s", value);
    return 0;
}
SIM_EXPORT int simnode_get_hang_ms(int dev) { sim_dev_t *d = ctl_dev(dev); return d ? d->hang_ms : -1; }

SIM_EXPORT long long simnode_push_event(int dev, unsigned long long type, unsigned long long data) {
    sim_dev_t *d = ctl_dev(dev);
    if (!d || type == 0 || (type & (type - 1))) return -1;
    if (type == nvmlEventTypeSingleBitEccError) { bump(d, R_ecc_sbe_volatile, 1); bump(d, R_ecc_sbe_aggregate, 1); }
    if (type == nvmlEventTypeDoubleBitEccError) { bump(d, R_ecc_dbe_volatile, 1); bump(d, R_ecc_dbe_aggregate, 1); }
    uint64_t s;
    sim_event_t *e = ring_claim(dev, &s);
    e->type = type; e->data = data; e->gi = SIM_MIG_NONE; e->ci = SIM_MIG_NONE;
    return ring_publish(e, s);
}

/* The current sample becomes the newest of the older ones (the oldest drops out). */
static void proc_sample_push(sim_proc_t *p) {
    memmove(&p->older[1], &p->older[0], sizeof(sim_sample_t) * (SIM_PROC_OLDER - 1));
    p->older[0] = (sim_sample_t){p->sample_ts_us, p->sm_util, p->mem_util, p->enc_util, p->dec_util};
}

/* Adds or updates (pid, dev).  kinds: bit0 compute, bit1 graphics, bit2 MPS. */
SIM_EXPORT int simnode_proc_add(int dev, unsigned int pid, unsigned int kinds, double used_mib,
                                double sm, double mem, double enc, double dec) {
    if (!ctl_dev(dev) || pid == 0) return -1;
    int existing;
    int slot = proc_slot(dev, pid, &existing);
    if (slot < 0) return -3;
    proc_write_begin();
    sim_proc_t *p = &g_ctl->proc[slot];
    uint64_t now = now_us();
    int changed = !existing || p->sm_util != sm || p->mem_util != mem || p->enc_util != enc || p->dec_util != dec;
    if (!existing) memset(p->older, 0, sizeof p->older);
    else if (changed && p->sample_ts_us < now) proc_sample_push(p); /* the old figures stay buffered */
    if (!existing) p->gi = p->ci = SIM_MIG_NONE; /* simnode_proc_set_mig places it on an instance */
    p->pid = pid; p->kinds = kinds ? kinds : 1u; p->used_mem_bytes = u64(used_mib * MIB);
    p->sm_util = sm; p->mem_util = mem; p->enc_util = enc; p->dec_util = dec;
    if (changed) p->sample_ts_us = now; /* unchanged: the periodic sample in simnode_tick stands */
    p->dev = dev;
    proc_write_end();
    return 0;
}
/* Advances counters by dt seconds; takes a process-utilization sample every
 * SIM_PROC_SAMPLE_US (the previous one stays in the buffer). */
SIM_EXPORT int simnode_tick(double dt) {
    if (!g_ctl || !(dt >= 0)) return -1;
    for (unsigned i = 0; i < g_ctl->n_devices; i++) {
        sim_dev_t *d = &g_ctl->dev[i];
        if (d->lost) continue;
        bump(d, R_energy_mj, RV(power_w) * 1000.0 * dt);
        bump(d, R_pcie_tx_bytes, RV(pcie_tx_kb_s) * 1024.0 * dt);
        bump(d, R_pcie_rx_bytes, RV(pcie_rx_kb_s) * 1024.0 * dt);
        bump(d, R_nvlink_tx_kib, RV(nvlink_tx_kib_s) * dt);
        bump(d, R_nvlink_rx_kib, RV(nvlink_rx_kib_s) * dt);
        uint64_t reasons = u64(RV(clocks_event_reasons));
        double ns = dt * 1e9;
        int any = 0;
        if (reasons & nvmlClocksEventReasonSwPowerCap) { bump(d, R_violation_power_ns, ns); any = 1; }
        if (reasons & (nvmlClocksEventReasonSwThermalSlowdown | nvmlClocksThrottleReasonHwThermalSlowdown)) { bump(d, R_violation_thermal_ns, ns); any = 1; }
        if (reasons & nvmlClocksEventReasonSwThermalSlowdown) bump(d, R_violation_sw_thermal_ns, ns);
        if (reasons & nvmlClocksThrottleReasonHwThermalSlowdown) bump(d, R_violation_hw_thermal_ns, ns);
        if (reasons & nvmlClocksThrottleReasonHwPowerBrakeSlowdown) { bump(d, R_violation_hw_power_brake_ns, ns); any = 1; }
        if (reasons & nvmlClocksEventReasonSyncBoost) { bump(d, R_violation_sync_boost_ns, ns); any = 1; }
        if (reasons & nvmlClocksEventReasonBoardLimit) { bump(d, R_violation_board_limit_ns, ns); any = 1; }
        if (any) { bump(d, R_violation_app_clocks_ns, ns); bump(d, R_violation_base_clocks_ns, ns); }
    }
    uint64_t now = now_us();
    if (now - g_ctl->proc_last_touch_us >= SIM_PROC_SAMPLE_US) {
        g_ctl->proc_last_touch_us = now;
        proc_write_begin();
        for (int i = 0; i < SIM_MAX_PROC; i++) {
            sim_proc_t *p = &g_ctl->proc[i];
            if (p->dev < 0 || p->sample_ts_us >= now) continue;
            proc_sample_push(p);
            p->sample_ts_us = now;
        }
        proc_write_end();
    }
    return 0;
}

#include "nvml_chaos_ctl.h"
#include "nvml_sim_mig.c"
