/*
 * Simulated AMD SMI: a libamd_smi.so serving the AMD GPUs of a simulated node.
 *
 * The struct layouts are those the PyPI `amdsmi` package's ctypes wrapper declares
 * (amdsmi_wrapper.py, every struct _pack_ = 1 with explicit padding), so the real
 * `amdsmi` Python package runs unchanged against this library.  A test compares every
 * struct size and the offsets we rely on with the wrapper's ctypes classes.
 *
 * Every client process maps the same state file (MAP_SHARED), found through
 * $GPU_SIM_AMD_NODE at amdsmi_init time, next to the simulated NVML state of the same
 * node.  The node daemon drives the state through the exported simamd_* functions.
 *
 * The wrapper binds ~180 symbols at import time; the ones not implemented here are
 * generated as stubs returning AMDSMI_STATUS_NOT_SUPPORTED by build_amdsmi.py (counted too).
 */
#define _GNU_SOURCE
#include "simcore.h"

#define AMD_MAGIC 0x314D53444D414953ULL /* "SIAMDSM1" */
#define AMD_LAYOUT_VERSION 4
#define AMD_MAX_DEV 64
#define AMD_MAX_PROC 4096
#define AMD_RING 1024
#define AMD_STR 256
#define AMD_NA16 0xFFFFu
#define AMD_NA32 0xFFFFFFFFu
#define AMD_NA64 0xFFFFFFFFFFFFFFFFull

typedef uint32_t amdsmi_status_t;
enum {
    AMDSMI_STATUS_SUCCESS = 0, AMDSMI_STATUS_INVAL = 1, AMDSMI_STATUS_NOT_SUPPORTED = 2,
    AMDSMI_STATUS_DRM_ERROR = 6,
    AMDSMI_STATUS_TIMEOUT = 8, AMDSMI_STATUS_OUT_OF_RESOURCES = 15, AMDSMI_STATUS_BUSY = 30,
    AMDSMI_STATUS_INPUT_OUT_OF_BOUNDS = 17, AMDSMI_STATUS_INIT_ERROR = 18,
    AMDSMI_STATUS_NOT_FOUND = 31, AMDSMI_STATUS_NOT_INIT = 32,
    AMDSMI_STATUS_DRIVER_NOT_LOADED = 34, AMDSMI_STATUS_NO_DATA = 40,
    AMDSMI_STATUS_INSUFFICIENT_SIZE = 41,
};
enum { AMDSMI_PROCESSOR_TYPE_AMD_GPU = 1 };
enum { TEMP_EDGE = 0, TEMP_HOTSPOT = 1, TEMP_VRAM = 2 };
enum { TEMP_CURRENT = 0 };
enum { CLK_GFX = 0, CLK_SOC = 3, CLK_MEM = 4, CLK_VCLK0 = 6, CLK_DCLK0 = 8 };
/* What the modelled library answers on a partition (simamd_set_partition's flags). */
enum {
    LIB_VRAM_SPLIT = 1, /* vram_total: the partition's even share (else the whole device) */
    LIB_MODES_ALL = 2,  /* partition modes on every partition (else only on XCP 0) */
    LIB_PART_MEMORY = 4, /* amdsmi_get_gpu_memory_usage: the partition's own VRAM use */
};
enum { EVT_VMFAULT = 1, EVT_THERMAL_THROTTLE = 2, EVT_GPU_PRE_RESET = 3, EVT_GPU_POST_RESET = 4,
       EVT_LAST = 13 };

/* ------------------------------------------------------------------------ */
/* Structs exactly as amdsmi_wrapper.py declares them (packed, padded).     */
/* ------------------------------------------------------------------------ */
#pragma pack(push, 1)
typedef union {
    struct { uint64_t function_number : 3, device_number : 5, bus_number : 8, domain_number : 48; } f;
    uint64_t as_uint;
} amdsmi_bdf_t;
typedef struct {
    char market_name[256]; uint32_t vendor_id; char vendor_name[256]; uint32_t subvendor_id;
    uint64_t device_id; uint32_t rev_id; char asic_serial[256]; uint32_t oam_id;
    uint32_t num_of_compute_units; uint8_t pad0[4]; uint64_t target_graphics_version;
    uint32_t subsystem_id; uint32_t reserved[21];
} amdsmi_asic_info_t;
typedef struct {
    char model_number[256]; char product_serial[256]; char fru_id[256]; char product_name[256];
    char manufacturer_name[256]; uint64_t reserved[64];
} amdsmi_board_info_t;
typedef struct { char driver_version[256]; char driver_date[256]; char driver_name[256]; } amdsmi_driver_info_t;
typedef struct { uint32_t gfx_activity, umc_activity, mm_activity; uint32_t reserved[13]; } amdsmi_engine_usage_t;
typedef struct { uint32_t vram_total, vram_used; uint32_t reserved[2]; } amdsmi_vram_usage_t;
typedef struct {
    uint64_t socket_power; uint32_t current_socket_power, average_socket_power;
    uint64_t gfx_voltage, soc_voltage, mem_voltage; uint32_t power_limit; uint8_t pad0[4];
    uint64_t reserved[18];
} amdsmi_power_info_t;
typedef struct {
    uint32_t clk, min_clk, max_clk; uint8_t clk_locked, clk_deep_sleep; uint8_t pad0[2];
    uint32_t reserved[4];
} amdsmi_clk_info_t;
typedef struct { uint64_t correctable_count, uncorrectable_count, deferred_count; uint64_t reserved[5]; } amdsmi_error_count_t;
typedef struct {
    uint64_t power_cap, default_power_cap, dpm_cap, min_power_cap, max_power_cap; uint64_t reserved[3];
} amdsmi_power_cap_info_t;
typedef struct {
    struct {
        uint16_t max_pcie_width; uint8_t pad0[2]; uint32_t max_pcie_speed, pcie_interface_version;
        uint32_t slot_type, max_pcie_interface_version; uint8_t pad1[4]; uint64_t reserved[9];
    } pcie_static;
    struct {
        uint16_t pcie_width; uint8_t pad0[2]; uint32_t pcie_speed, pcie_bandwidth; uint8_t pad1[4];
        uint64_t pcie_replay_count, pcie_l0_to_recovery_count, pcie_replay_roll_over_count;
        uint64_t pcie_nak_sent_count, pcie_nak_received_count;
        uint32_t pcie_lc_perf_other_end_recovery_count; uint8_t pad2[4]; uint64_t reserved[12];
    } pcie_metric;
    uint64_t reserved[32];
} amdsmi_pcie_info_t;
typedef struct {
    uint64_t reference_timestamp, violation_timestamp, acc_counter, acc_prochot_thrm, acc_ppt_pwr;
    uint64_t acc_socket_thrm, acc_vr_thrm, acc_hbm_thrm, acc_gfx_clk_below_host_limit;
    uint64_t per_prochot_thrm, per_ppt_pwr, per_socket_thrm, per_vr_thrm, per_hbm_thrm;
    uint64_t per_gfx_clk_below_host_limit;
    uint8_t active_prochot_thrm, active_ppt_pwr, active_socket_thrm, active_vr_thrm, active_hbm_thrm;
    uint8_t active_gfx_clk_below_host_limit; uint8_t pad0[2];
    uint64_t acc_xcp[4][8][8];  /* acc_gfx_clk_below_host_limit_pwr/_thm, acc_low_utilization, _total */
    uint64_t per_xcp[4][8][8];
    uint8_t active_xcp[4][8][8];
    uint64_t reserved[3][8][8];
} amdsmi_violation_status_t;
typedef struct {
    uint32_t num_links; uint8_t pad0[4];
    struct {
        amdsmi_bdf_t bdf; uint32_t bit_rate, max_bandwidth, link_type; uint8_t pad0[4];
        uint64_t read, write; uint64_t reserved[2];
    } links[64];
    uint64_t reserved[7];
} amdsmi_link_metrics_t;
typedef struct {
    char name[256]; uint32_t pid; uint8_t pad0[4]; uint64_t mem;
    struct { uint64_t gfx, enc; uint32_t reserved[12]; } engine_usage;
    struct { uint64_t gtt_mem, cpu_mem, vram_mem; uint32_t reserved[10]; } memory_usage;
    char container_name[256]; uint32_t cu_occupancy; uint32_t reserved[11];
} amdsmi_proc_info_t;
typedef struct { void *processor_handle; uint32_t event; char message[256]; uint8_t pad0[4]; } amdsmi_evt_notification_data_t;
typedef struct {
    uint8_t xgmi_lanes; uint8_t pad0[7]; uint64_t xgmi_hive_id, xgmi_node_id; uint32_t index; uint32_t reserved[9];
} amdsmi_xgmi_info_t;
typedef struct { uint32_t major, minor, release; uint8_t pad0[4]; const char *build; } amdsmi_version_t;
typedef struct { uint64_t kfd_id; uint32_t node_id, current_partition_id; uint32_t reserved[12]; } amdsmi_kfd_info_t;
typedef struct {
    uint32_t gfx_busy_inst[8]; uint16_t jpeg_busy[40]; uint16_t vcn_busy[4];
    uint64_t gfx_busy_acc[8], gfx_below_host_limit_acc[8], gfx_below_host_limit_ppt_acc[8];
    uint64_t gfx_below_host_limit_thm_acc[8], gfx_low_utilization_acc[8];
    uint64_t gfx_below_host_limit_total_acc[8];
} amdsmi_gpu_xcp_metrics_t;
typedef struct {
    struct { uint16_t structure_size; uint8_t format_revision, content_revision; } common_header;
    uint16_t temperature_edge, temperature_hotspot, temperature_mem, temperature_vrgfx;
    uint16_t temperature_vrsoc, temperature_vrmem, average_gfx_activity, average_umc_activity;
    uint16_t average_mm_activity, average_socket_power;
    uint64_t energy_accumulator, system_clock_counter;
    uint16_t average_gfxclk_frequency, average_socclk_frequency, average_uclk_frequency;
    uint16_t average_vclk0_frequency, average_dclk0_frequency, average_vclk1_frequency;
    uint16_t average_dclk1_frequency, current_gfxclk, current_socclk, current_uclk;
    uint16_t current_vclk0, current_dclk0, current_vclk1, current_dclk1;
    uint32_t throttle_status;
    uint16_t current_fan_speed, pcie_link_width, pcie_link_speed; uint8_t pad0[2];
    uint32_t gfx_activity_acc, mem_activity_acc;
    uint16_t temperature_hbm[4];
    uint64_t firmware_timestamp;
    uint16_t voltage_soc, voltage_gfx, voltage_mem; uint8_t pad1[2];
    uint64_t indep_throttle_status;
    uint16_t current_socket_power; uint16_t vcn_activity[4]; uint8_t pad2[2];
    uint32_t gfxclk_lock_status;
    uint16_t xgmi_link_width, xgmi_link_speed; uint8_t pad3[4];
    uint64_t pcie_bandwidth_acc, pcie_bandwidth_inst, pcie_l0_to_recov_count_acc;
    uint64_t pcie_replay_count_acc, pcie_replay_rover_count_acc;
    uint64_t xgmi_read_data_acc[8], xgmi_write_data_acc[8];
    uint16_t current_gfxclks[8], current_socclks[4], current_vclk0s[4], current_dclk0s[4];
    uint16_t jpeg_activity[32];
    uint32_t pcie_nak_sent_count_acc, pcie_nak_rcvd_count_acc;
    uint64_t accumulation_counter, prochot_residency_acc, ppt_residency_acc;
    uint64_t socket_thm_residency_acc, vr_thm_residency_acc, hbm_thm_residency_acc;
    uint16_t num_partition; uint8_t pad4[6];
    amdsmi_gpu_xcp_metrics_t xcp_stats[8];
    uint32_t pcie_lc_perf_other_end_recovery; uint8_t pad5[4];
    uint64_t vram_max_bandwidth;
    uint16_t xgmi_link_status[8];
} amdsmi_gpu_metrics_t;
#pragma pack(pop)

/* Sizes and offsets for the layout test (compared with the wrapper's ctypes classes). */
#define AMD_LAYOUTS(X)                                                                   \
    X(amdsmi_bdf_t, as_uint) X(amdsmi_asic_info_t, target_graphics_version)              \
    X(amdsmi_asic_info_t, num_of_compute_units) X(amdsmi_board_info_t, product_name)     \
    X(amdsmi_driver_info_t, driver_name) X(amdsmi_engine_usage_t, mm_activity)           \
    X(amdsmi_vram_usage_t, vram_used) X(amdsmi_power_info_t, power_limit)                \
    X(amdsmi_clk_info_t, clk_deep_sleep) X(amdsmi_error_count_t, deferred_count)         \
    X(amdsmi_power_cap_info_t, max_power_cap) X(amdsmi_pcie_info_t, pcie_metric)         \
    X(amdsmi_violation_status_t, active_hbm_thrm) X(amdsmi_violation_status_t, reserved) \
    X(amdsmi_link_metrics_t, links) X(amdsmi_proc_info_t, memory_usage)                  \
    X(amdsmi_proc_info_t, cu_occupancy) X(amdsmi_evt_notification_data_t, message)       \
    X(amdsmi_xgmi_info_t, index) X(amdsmi_version_t, build)                             \
    X(amdsmi_gpu_xcp_metrics_t, gfx_below_host_limit_total_acc)                          \
    X(amdsmi_gpu_metrics_t, energy_accumulator) X(amdsmi_gpu_metrics_t, throttle_status)   \
    X(amdsmi_gpu_metrics_t, indep_throttle_status) X(amdsmi_gpu_metrics_t, current_socket_power) \
    X(amdsmi_gpu_metrics_t, xgmi_read_data_acc) X(amdsmi_gpu_metrics_t, current_gfxclks)   \
    X(amdsmi_gpu_metrics_t, accumulation_counter) X(amdsmi_gpu_metrics_t, xcp_stats)       \
    X(amdsmi_gpu_metrics_t, xgmi_link_status) X(amdsmi_kfd_info_t, current_partition_id)   \
    X(amdsmi_kfd_info_t, reserved)

#define X_LNAME(t, f) #t "." #f,
#define X_LSIZE(t, f) sizeof(t),
#define X_LOFF(t, f) __builtin_offsetof(t, f),
static const char *const g_layout_names[] = {AMD_LAYOUTS(X_LNAME)};
static const size_t g_layout_sizes[] = {AMD_LAYOUTS(X_LSIZE)};
static const size_t g_layout_offsets[] = {AMD_LAYOUTS(X_LOFF)};
SIM_EXPORT int simamd_layout_count(void) { return (int)(sizeof g_layout_sizes / sizeof g_layout_sizes[0]); }
SIM_EXPORT const char *simamd_layout_name(int i) { return i >= 0 && i < simamd_layout_count() ? g_layout_names[i] : NULL; }
SIM_EXPORT long simamd_layout_size(int i) { return i >= 0 && i < simamd_layout_count() ? (long)g_layout_sizes[i] : -1; }
SIM_EXPORT long simamd_layout_offset(int i) { return i >= 0 && i < simamd_layout_count() ? (long)g_layout_offsets[i] : -1; }

/* ------------------------------------------------------------------------ */
/* Readings: one double per (device, reading) plus an "N/A" flag.  The      */
/* names are the scenario keys of an AMD device.                            */
/* ------------------------------------------------------------------------ */
#define AMD_READINGS(X)                                                           \
    X(utilization_gpu) X(utilization_memory) X(utilization_mm)                    \
    X(memory_total_mib) X(memory_used_mib) X(temperature_c)                       \
    X(hotspot_temperature_c) X(memory_temperature_c) X(power_w) X(power_limit_w)  \
    X(power_default_limit_w) X(power_min_limit_w) X(power_max_limit_w)            \
    X(gfx_clock_mhz) X(memory_clock_mhz) X(soc_clock_mhz) X(video_clock_mhz)      \
    X(decoder_clock_mhz) X(max_gfx_clock_mhz) X(max_memory_clock_mhz)             \
    X(fan_percent) X(pcie_link_width) X(pcie_link_speed_mts)                      \
    X(pcie_max_link_width) X(pcie_max_link_speed_mts) X(pcie_bandwidth_mbps)      \
    X(pcie_replay_counter) X(ecc_correctable) X(ecc_uncorrectable)                \
    X(ecc_deferred) X(throttle_ppt) X(throttle_socket_thermal)                    \
    X(throttle_vr_thermal) X(throttle_hbm_thermal) X(throttle_prochot)            \
    X(xgmi_links) X(xgmi_read_kb_s) X(xgmi_write_kb_s) X(xgmi_read_kb)            \
    X(xgmi_write_kb) X(energy_uj) X(violation_acc_counter) X(violation_ppt_acc)   \
    X(violation_socket_thermal_acc) X(violation_vr_thermal_acc)                   \
    X(violation_hbm_thermal_acc) X(violation_prochot_acc)                         \
    X(compute_units) X(pci_device_id) X(pci_revision) X(minor_number)             \
    X(gpu_metrics_content_revision) X(package_power_here) X(ras_enabled)

#define X_ENUM(n) R_##n,
enum { AMD_READINGS(X_ENUM) R_COUNT };
#define X_STR(n) #n,
static const char *const g_reading_names[] = {AMD_READINGS(X_STR)};

/* The amdsmi functions implemented here (others are generated stubs, see build_amdsmi.py). */
#define AMD_FUNCS(X)                                                                  \
    X(amdsmi_init) X(amdsmi_shut_down) X(amdsmi_get_socket_handles)                   \
    X(amdsmi_get_socket_info) X(amdsmi_get_processor_handles)                         \
    X(amdsmi_get_processor_type) X(amdsmi_get_gpu_device_bdf)                         \
    X(amdsmi_get_gpu_device_uuid) X(amdsmi_get_gpu_asic_info)                         \
    X(amdsmi_get_gpu_board_info) X(amdsmi_get_gpu_driver_info)                        \
    X(amdsmi_get_gpu_activity) X(amdsmi_get_gpu_vram_usage)                           \
    X(amdsmi_get_temp_metric) X(amdsmi_get_power_info) X(amdsmi_get_energy_count)     \
    X(amdsmi_get_clock_info) X(amdsmi_get_pcie_info) X(amdsmi_get_gpu_total_ecc_count) \
    X(amdsmi_get_violation_status) X(amdsmi_get_power_cap_info)                       \
    X(amdsmi_get_gpu_fan_speed) X(amdsmi_get_gpu_fan_speed_max)                       \
    X(amdsmi_get_link_metrics) X(amdsmi_get_xgmi_info) X(amdsmi_get_gpu_process_list) \
    X(amdsmi_init_gpu_event_notification) X(amdsmi_set_gpu_event_notification_mask)   \
    X(amdsmi_get_gpu_event_notification) X(amdsmi_stop_gpu_event_notification)       \
    X(amdsmi_status_code_to_string) X(amdsmi_get_lib_version)                         \
    X(amdsmi_get_processor_handle_from_bdf) X(amdsmi_free_name_value_pairs)         \
    X(amdsmi_get_gpu_metrics_info) X(amdsmi_get_gpu_ecc_enabled)                     \
    X(amdsmi_get_gpu_compute_partition) X(amdsmi_get_gpu_memory_partition)           \
    X(amdsmi_get_gpu_kfd_info) X(amdsmi_get_gpu_memory_usage)

#define X_FENUM(n) FN_##n,
enum { AMD_FUNCS(X_FENUM) FN_IMPLEMENTED };
/* Stubs get ids from FN_IMPLEMENTED on; the stub table is generated into the build. */
#define FN_MAX 512
static const char *const g_func_names_impl[] = {AMD_FUNCS(X_STR)};
extern const char *const simamd_stub_names[];
extern const int simamd_stub_count;

/* ------------------------------------------------------------------------ */
/* Shared state                                                             */
/* ------------------------------------------------------------------------ */
typedef struct {
    char name[AMD_STR];
    char uuid[64];
    char serial[64];
    char vbios[64];
    uint64_t bdf;
    int32_t lost;
    int32_t hang_ms;
    uint32_t reset_status; /* while in reset: the status sysfs-backed calls answer; 0 = none */
    uint32_t pad_reset;
    /* A partitioned MI300X serves one processor per compute partition (XCP) on one socket:
     * socket1 = 1 + the index of the socket's primary processor (XCP 0), 0 = a socket of its
     * own.  Empty mode strings: the part has no partition sysfs files (MI200). */
    int32_t socket1;
    uint32_t partition_id;
    uint32_t uuid_per_partition; /* 1: the library puts the partition id into the UUID */
    uint32_t lib_flags; /* LIB_*: what the modelled amdsmi/kernel answer on a partition */
    char compute_partition[16];
    char memory_partition[16];
    double val[R_COUNT];
    uint8_t na[R_COUNT];
    uint8_t fn_unsup[FN_MAX];
} amd_dev_t;

typedef struct {
    uint32_t pid;
    int32_t dev; /* -1: free slot */
    uint64_t vram_bytes, gtt_bytes, cpu_bytes;
    double gfx_util, enc_util; /* percent, integrated into the ns counters by the tick */
    double gfx_ns, enc_ns;
    uint32_t cu_occupancy;
    uint32_t drm; /* 1: submits through DRM (graphics); 0: a HIP/KFD process, invisible to fdinfo */
} amd_proc_t;

typedef struct {
    uint64_t seq;
    int32_t dev;
    uint32_t type;
    char message[AMD_STR];
} amd_event_t;

typedef struct {
    uint64_t magic;
    uint32_t layout_version;
    uint32_t n_devices;
    char driver_version[64];
    char driver_date[64];
    uint32_t lib_major, lib_minor, lib_release, pad_lib; /* amdsmi_get_lib_version */
    uint32_t proc_gen;  /* seqlock: odd while the daemon writes the table */
    uint32_t ev_futex;
    uint32_t ev_lock;
    uint32_t pad;
    uint64_t ev_seq;
    amd_event_t ring[AMD_RING];
    amd_dev_t dev[AMD_MAX_DEV];
    amd_proc_t proc[AMD_MAX_PROC];
    uint64_t calls[FN_MAX][AMD_MAX_DEV + 1]; /* last column: total */
} amd_state_t;

struct amd_handle { uint32_t magic; uint32_t index; };
#define HANDLE_MAGIC 0x41474455u
static struct amd_handle g_handles[AMD_MAX_DEV];
static struct amd_handle g_socket_handles[AMD_MAX_DEV];
/* Event notification is per client process: which devices were initialised and their masks. */
static uint64_t g_evt_mask[AMD_MAX_DEV];
static uint8_t g_evt_init[AMD_MAX_DEV];
static uint64_t g_evt_last_seq = 0;
static pthread_mutex_t g_evt_lock = PTHREAD_MUTEX_INITIALIZER;

#define SIMCORE_STATE_T amd_state_t
#define SIMCORE_DEV_T amd_dev_t
#define SIMCORE_EVENT_T amd_event_t
#define SIMCORE_MAGIC AMD_MAGIC
#define SIMCORE_LAYOUT_VERSION AMD_LAYOUT_VERSION
#define SIMCORE_MAX_DEV AMD_MAX_DEV
#define SIMCORE_MAX_PROC AMD_MAX_PROC
#define SIMCORE_RING AMD_RING
#define SIMCORE_FN_SLOTS FN_MAX
#define SIMCORE_NA na
#define SIMCORE_CTL(name) SIMCORE_CAT(simamd_, name)
#include "simcore_state.h"

/* ------------------------------------------------------------------------ */
/* Common prologue                                                          */
/* ------------------------------------------------------------------------ */
/* Exported: the generated stubs count their calls through simamd_count_stub. */
SIM_EXPORT void simamd_count_call(int fn, int dev) { count_call(fn, dev); }

/* A device that fell off the bus.  amdsmi keeps its processor list from init, so the handle
 * stays valid (NOT_FOUND is only for a handle it never gave out: handle_to_processor, amd_smi.cc
 * at 0ceca28) and what it cached answers (BDF, processor type).  The DRM ioctls fail
 * (amdgpu_query_info -> AMDSMI_STATUS_DRM_ERROR, amd_smi_drm.cc) and the device's sysfs files
 * are gone (ENOENT -> NOT_SUPPORTED, ErrnoToRsmiStatus in rocm_smi_utils.cc). */
static amdsmi_status_t lost_status(int fn) {
    if (fn == FN_amdsmi_get_gpu_device_bdf || fn == FN_amdsmi_get_processor_type)
        return AMDSMI_STATUS_SUCCESS;
    if (fn == FN_amdsmi_get_gpu_vram_usage || fn == FN_amdsmi_get_gpu_driver_info)
        return AMDSMI_STATUS_DRM_ERROR;
    return AMDSMI_STATUS_NOT_SUPPORTED;
}

/* During a GPU reset amdgpu answers sysfs reads with EPERM (older kernels) or EBUSY, which
 * rocm_smi's ErrnoToRsmiStatus turns into NOT_SUPPORTED or BUSY (rocm_smi_utils.cc).  What
 * amdsmi holds from init (BDF, processor type), the KFD event file and KFD's process list keep
 * answering. */
static int reset_exempt(int fn) {
    return fn == FN_amdsmi_get_gpu_device_bdf || fn == FN_amdsmi_get_processor_type ||
           fn == FN_amdsmi_init_gpu_event_notification ||
           fn == FN_amdsmi_set_gpu_event_notification_mask ||
           fn == FN_amdsmi_stop_gpu_event_notification ||
           fn == FN_amdsmi_get_gpu_process_list; /* KFD's /sys/class/kfd/kfd/proc */
}

/* The socket's primary processor (XCP 0) holds what is physical: socket power and energy,
 * temperatures, and whether the package is lost or in reset. */
static amd_dev_t *socket_dev(amd_dev_t *d) {
    int s = d->socket1 - 1;
    return s >= 0 && (unsigned)s < g_st->n_devices ? &g_st->dev[s] : d;
}

static amdsmi_status_t dev_enter(int fn, const void *h, amd_dev_t **out) {
    switch (simcore_dev_enter(fn, h, out)) {
    case SIMCORE_OK: {
        amd_dev_t *s = socket_dev(*out);
        if (s != *out && __atomic_load_n(&s->lost, __ATOMIC_ACQUIRE)) {
            amdsmi_status_t l = lost_status(fn);
            if (l != AMDSMI_STATUS_SUCCESS) return l;
        }
        uint32_t r = __atomic_load_n(&(*out)->reset_status, __ATOMIC_ACQUIRE);
        if (!r) r = __atomic_load_n(&s->reset_status, __ATOMIC_ACQUIRE);
        if (r && !reset_exempt(fn)) return r;
        return AMDSMI_STATUS_SUCCESS;
    }
    case SIMCORE_UNINIT: return AMDSMI_STATUS_NOT_INIT;
    case SIMCORE_BAD_HANDLE: return AMDSMI_STATUS_INVAL;
    case SIMCORE_LOST: {
        amdsmi_status_t l = lost_status(fn);
        if (l == AMDSMI_STATUS_SUCCESS) *out = &g_st->dev[handle_index(h)];
        return l;
    }
    case SIMCORE_FN_UNSUP: return AMDSMI_STATUS_NOT_SUPPORTED;
    }
    return AMDSMI_STATUS_INVAL;
}

#define DEV_ENTER(fname)                                            \
    amd_dev_t *d = NULL;                                            \
    do {                                                            \
        amdsmi_status_t _r = dev_enter(FN_##fname, h, &d);          \
        if (_r != AMDSMI_STATUS_SUCCESS) return _r;                 \
    } while (0)
#define SYS_ENTER(fname)                                            \
    do {                                                            \
        simamd_count_call(FN_##fname, -1);                          \
        if (!g_st || g_init_count <= 0) return AMDSMI_STATUS_NOT_INIT; \
    } while (0)
#define NEED(ptr) do { if (!(ptr)) return AMDSMI_STATUS_INVAL; } while (0)
#define RV(n) (d->val[R_##n])
#define NA(n) (d->na[R_##n])

static uint32_t u32(double v) { return v <= 0 ? 0u : v >= 4294967295.0 ? 4294967295u : (uint32_t)llround(v); }
static uint64_t u64(double v) { return v <= 0 ? 0ull : (uint64_t)llround(v); }
/* MB as amdgpu_get_gpu_vram_usage reports them: bytes / 2^20 in integer arithmetic, so a part
 * of a MB is dropped, not rounded (amd_smi.cc at ROCm/amdsmi 0ceca28).  The epsilon keeps a
 * whole figure computed in floating point (196592 / 8 * 8) whole. */
/* Bytes per fdinfo KiB in the process list, by the modelled library (see the process list). */
static uint64_t kib_factor(void) {
    unsigned major = g_st && g_st->lib_major ? g_st->lib_major : 26;
    unsigned minor = g_st && g_st->lib_major ? g_st->lib_minor : 0;
    if (major < 25 || (major == 26 && minor >= 12) || major > 26) return 1024;
    return 1000;
}
static uint32_t mb(double v) { return v <= 0 ? 0u : v >= 4294967295.0 ? 4294967295u : (uint32_t)floor(v + 1e-6); }
/* AMD reports an unreadable field in band: all ones (or 0xFFFF for 16-bit activity). */
static uint32_t v32(amd_dev_t *d, int r) { return d->na[r] ? AMD_NA32 : u32(d->val[r]); }
static uint64_t v64(amd_dev_t *d, int r) { return d->na[r] ? AMD_NA64 : u64(d->val[r]); }
static uint16_t v16(amd_dev_t *d, int r) { return d->na[r] ? (uint16_t)AMD_NA16 : (uint16_t)u32(d->val[r]); }

static void copy_str(char *dst, size_t len, const char *src) {
    snprintf(dst, len, "%s", src);
}

/* ------------------------------------------------------------------------ */
/* Init, discovery, identity                                                */
/* ------------------------------------------------------------------------ */
SIM_EXPORT amdsmi_status_t amdsmi_init(uint64_t flags) {
    (void)flags;
    pthread_mutex_lock(&g_init_lock);
    if (!g_st) {
        const char *path = getenv("GPU_SIM_AMD_NODE");
        if (!path || !*path) { pthread_mutex_unlock(&g_init_lock); return AMDSMI_STATUS_DRIVER_NOT_LOADED; }
        g_st = map_state(path, 0, 0);
        if (!g_st) { pthread_mutex_unlock(&g_init_lock); return AMDSMI_STATUS_DRIVER_NOT_LOADED; }
        for (unsigned i = 0; i < AMD_MAX_DEV; i++) {
            g_handles[i].magic = HANDLE_MAGIC; g_handles[i].index = i;
            g_socket_handles[i].magic = HANDLE_MAGIC; g_socket_handles[i].index = i;
        }
    }
    g_init_count++;
    pthread_mutex_unlock(&g_init_lock);
    simamd_count_call(FN_amdsmi_init, -1);
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_shut_down(void) {
    simamd_count_call(FN_amdsmi_shut_down, -1);
    pthread_mutex_lock(&g_init_lock);
    if (g_init_count <= 0) { pthread_mutex_unlock(&g_init_lock); return AMDSMI_STATUS_NOT_INIT; }
    g_init_count--; /* the mapping stays: other threads may still be inside a call */
    pthread_mutex_unlock(&g_init_lock);
    return AMDSMI_STATUS_SUCCESS;
}

/* amdsmi groups GPU processors into sockets by the domain:bus:device of their BDF
 * (AMDSmiSystem::get_gpu_socket_id, amd_smi_system.cc): one socket per physical GPU, holding
 * one processor, or one per compute partition of a partitioned MI300X.  A socket handle here
 * is that of its primary processor's index. */
static int is_socket(unsigned i) { int s = g_st->dev[i].socket1 - 1; return s < 0 || (unsigned)s == i; }
static int socket_of(unsigned i) { int s = g_st->dev[i].socket1 - 1; return s < 0 ? (int)i : s; }

/* What the kernel reports for a partitioned socket, whichever partition's handle asks: its
 * activity is the socket's (smu_v13_0_6_ppt.c fills average_gfx_activity from SocketGfxBusy,
 * the busy of all its XCCs: the mean over its partitions, which have equal XCC counts), its
 * VRAM use the device's one VRAM manager's (AMDGPU_INFO_VRAM_USAGE).  A partition whose
 * reading is N/A does not count; all N/A: 0 returned (N/A). */
static int socket_mean(amd_dev_t *d, int r, double *out) {
    if (d->socket1 <= 0) { *out = d->val[r]; return !d->na[r]; }
    double sum = 0; int n = 0;
    for (unsigned i = 0; i < g_st->n_devices; i++) {
        amd_dev_t *x = &g_st->dev[i];
        if (x->socket1 != d->socket1 || x->na[r]) continue;
        sum += x->val[r]; n++;
    }
    *out = n ? sum / n : 0;
    return n > 0;
}
static double socket_sum(amd_dev_t *d, int r) {
    if (d->socket1 <= 0) return d->val[r];
    double sum = 0;
    for (unsigned i = 0; i < g_st->n_devices; i++)
        if (g_st->dev[i].socket1 == d->socket1 && !g_st->dev[i].na[r]) sum += g_st->dev[i].val[r];
    return sum;
}
/* The partitions the socket's compute mode makes, served or not: a node may list fewer (two
 * real 8x MI300X CPX nodes list 63 of 64), and the XCCs and the VRAM are still divided by the
 * mode ("On MI300X, SPX: 1, DPX: 2, QPX: 4, CPX: 8", amdsmi's partition profile). */
static unsigned socket_partitions(amd_dev_t *d) {
    if (d->socket1 <= 0) return 1;
    static const struct { const char *mode; unsigned n; } modes[] = {
        {"SPX", 1}, {"DPX", 2}, {"TPX", 3}, {"QPX", 4}, {"CPX", 8}};
    for (unsigned k = 0; k < sizeof modes / sizeof modes[0]; k++)
        if (strcmp(d->compute_partition, modes[k].mode) == 0) return modes[k].n;
    unsigned n = 0;
    for (unsigned i = 0; i < g_st->n_devices; i++) n += g_st->dev[i].socket1 == d->socket1;
    return n ? n : 1;
}
static uint16_t act16(amd_dev_t *d, int r) {
    double v;
    if (!socket_mean(d, r, &v)) return (uint16_t)AMD_NA16;
    return (uint16_t)(u32(v) > 0xFFFE ? 0xFFFE : u32(v));
}

SIM_EXPORT amdsmi_status_t amdsmi_get_socket_handles(uint32_t *count, void **handles) {
    SYS_ENTER(amdsmi_get_socket_handles);
    NEED(count);
    uint32_t n = 0;
    for (unsigned i = 0; i < g_st->n_devices; i++) n += (uint32_t)is_socket(i);
    if (!handles) { *count = n; return AMDSMI_STATUS_SUCCESS; }
    uint32_t k = 0;
    for (unsigned i = 0; i < g_st->n_devices && k < *count; i++)
        if (is_socket(i)) handles[k++] = &g_socket_handles[i];
    *count = k;
    return k < n ? AMDSMI_STATUS_INSUFFICIENT_SIZE : AMDSMI_STATUS_SUCCESS;
}

static int socket_index(const void *s) {
    uintptr_t p = (uintptr_t)s, b = (uintptr_t)&g_socket_handles[0];
    if (!s || p < b || p >= b + sizeof(g_socket_handles) || (p - b) % sizeof(g_socket_handles[0])) return -1;
    int idx = (int)((p - b) / sizeof(g_socket_handles[0]));
    return g_st && (unsigned)idx < g_st->n_devices && is_socket((unsigned)idx) ? idx : -1;
}

/* The socket id amdsmi uses: "DDDD:BB:DD", upper-case hex (get_gpu_socket_id). */
SIM_EXPORT amdsmi_status_t amdsmi_get_socket_info(void *socket, size_t len, char *name) {
    SYS_ENTER(amdsmi_get_socket_info);
    int idx = socket_index(socket);
    if (idx < 0 || !name || len == 0) return AMDSMI_STATUS_INVAL;
    amdsmi_bdf_t b; b.as_uint = g_st->dev[idx].bdf;
    snprintf(name, len, "%04llX:%02llX:%02llX", (unsigned long long)b.f.domain_number,
             (unsigned long long)b.f.bus_number, (unsigned long long)b.f.device_number);
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_processor_handles(void *socket, uint32_t *count, void **handles) {
    SYS_ENTER(amdsmi_get_processor_handles);
    NEED(count);
    int idx = socket_index(socket);
    if (idx < 0) return AMDSMI_STATUS_INVAL;
    uint32_t n = 0;
    for (unsigned i = 0; i < g_st->n_devices; i++) n += socket_of(i) == idx;
    if (!handles) { *count = n; return AMDSMI_STATUS_SUCCESS; }
    if (*count < n) return AMDSMI_STATUS_INSUFFICIENT_SIZE;
    uint32_t k = 0;
    for (unsigned i = 0; i < g_st->n_devices; i++)
        if (socket_of(i) == idx) handles[k++] = &g_handles[i];
    *count = k;
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_processor_handle_from_bdf(amdsmi_bdf_t bdf, void **h) {
    SYS_ENTER(amdsmi_get_processor_handle_from_bdf);
    NEED(h);
    for (unsigned i = 0; i < g_st->n_devices; i++)
        if (g_st->dev[i].bdf == bdf.as_uint) { *h = &g_handles[i]; return AMDSMI_STATUS_SUCCESS; }
    return AMDSMI_STATUS_NOT_FOUND;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_processor_type(void *h, uint32_t *type) {
    DEV_ENTER(amdsmi_get_processor_type); NEED(type);
    (void)d;
    *type = AMDSMI_PROCESSOR_TYPE_AMD_GPU;
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_device_bdf(void *h, amdsmi_bdf_t *bdf) {
    DEV_ENTER(amdsmi_get_gpu_device_bdf); NEED(bdf);
    bdf->as_uint = d->bdf;
    return AMDSMI_STATUS_SUCCESS;
}

/* amdsmi_uuid_gen (amd_smi_uuid.cc at 0ceca28): a version-1 layout filled from the ASIC
 * serial (hex), the PCI device id and a function byte, which amdsmi_get_gpu_device_uuid
 * passes as 0xff -- so every partition of a socket, sharing its serial, gets the same UUID.
 * ROCm 7.12 puts the partition id into it (ROCm/rocm-systems PR 3977); modelled here in the
 * function byte. */
static void amdsmi_uuid(char *out, size_t len, uint64_t serial, uint16_t did, uint8_t fcn) {
    uint32_t time_low = (uint32_t)did | ((uint32_t)fcn << 16) | ((uint32_t)((serial >> 56) & 0xFF) << 24);
    snprintf(out, len, "%08x-0000-1000-80%02x-%04x%08x", time_low, (unsigned)((serial >> 48) & 0xFF),
             (unsigned)((serial >> 32) & 0xFFFF), (unsigned)(serial & 0xFFFFFFFFu));
}

SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_device_uuid(void *h, uint32_t *len, char *uuid) {
    DEV_ENTER(amdsmi_get_gpu_device_uuid); NEED(len); NEED(uuid);
    char generated[64];
    const char *src = d->uuid;
    if (!src[0]) {
        uint8_t fcn = d->uuid_per_partition ? (uint8_t)d->partition_id : 0xff;
        amdsmi_uuid(generated, sizeof generated, strtoull(d->serial, NULL, 16),
                    (uint16_t)u32(RV(pci_device_id)), fcn);
        src = generated;
    }
    size_t n = strnlen(src, sizeof generated);
    if (*len < n + 1) { *len = (uint32_t)(n + 1); return AMDSMI_STATUS_INSUFFICIENT_SIZE; }
    memcpy(uuid, src, n + 1);
    *len = (uint32_t)n;
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_asic_info(void *h, amdsmi_asic_info_t *info) {
    DEV_ENTER(amdsmi_get_gpu_asic_info); NEED(info);
    memset(info, 0, sizeof *info);
    copy_str(info->market_name, sizeof info->market_name, d->name);
    info->vendor_id = 0x1002;
    copy_str(info->vendor_name, sizeof info->vendor_name, "Advanced Micro Devices Inc. [AMD/ATI]");
    info->subvendor_id = 0x1002;
    info->device_id = u64(RV(pci_device_id));
    info->rev_id = u32(RV(pci_revision));
    copy_str(info->asic_serial, sizeof info->asic_serial, d->serial);
    info->oam_id = u32(RV(minor_number));
    info->num_of_compute_units = v32(d, R_compute_units);
    info->target_graphics_version = 0x942;
    info->subsystem_id = 0x74a1;
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_board_info(void *h, amdsmi_board_info_t *info) {
    DEV_ENTER(amdsmi_get_gpu_board_info); NEED(info);
    memset(info, 0, sizeof *info);
    copy_str(info->model_number, sizeof info->model_number, d->vbios);
    copy_str(info->product_serial, sizeof info->product_serial, d->serial);
    copy_str(info->product_name, sizeof info->product_name, d->name);
    copy_str(info->manufacturer_name, sizeof info->manufacturer_name, "AMD");
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_driver_info(void *h, amdsmi_driver_info_t *info) {
    DEV_ENTER(amdsmi_get_gpu_driver_info); NEED(info);
    (void)d;
    memset(info, 0, sizeof *info);
    copy_str(info->driver_version, sizeof info->driver_version, g_st->driver_version);
    copy_str(info->driver_date, sizeof info->driver_date, g_st->driver_date);
    copy_str(info->driver_name, sizeof info->driver_name, "amdgpu");
    return AMDSMI_STATUS_SUCCESS;
}

/* Partition modes as amdgpu's sysfs names them (current_compute_partition,
 * current_memory_partition), read by rocm_smi's rsmi_dev_compute_partition_get /
 * rsmi_dev_memory_partition_get; a part without those files answers NOT_SUPPORTED. */
static amdsmi_status_t partition_string(const char *mode, char *out, uint32_t len) {
    if (!mode[0]) return AMDSMI_STATUS_NOT_SUPPORTED;
    if (!out || len == 0) return AMDSMI_STATUS_INVAL;
    if (strlen(mode) + 1 > len) return AMDSMI_STATUS_INSUFFICIENT_SIZE;
    copy_str(out, len, mode);
    return AMDSMI_STATUS_SUCCESS;
}

/* Older libraries read the mode files of the processor's own device directory, which only
 * XCP 0 has: the others answer NOT_SUPPORTED (ENOENT).  amd-smi on ROCm 7.0.1 shows "N/A" as
 * the partition mode of a DPX MI300X's second partition (ROCm/k8s-gpu-dra-driver issue 20),
 * rocm-smi 6.4.1 "N/A" on every secondary one (ROCm/ROCm issue 4759). */
static int modes_here(const amd_dev_t *d) {
    return d->partition_id == 0 || (d->lib_flags & LIB_MODES_ALL);
}

SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_compute_partition(void *h, char *out, uint32_t len) {
    DEV_ENTER(amdsmi_get_gpu_compute_partition);
    if (!modes_here(d)) return AMDSMI_STATUS_NOT_SUPPORTED;
    return partition_string(d->compute_partition, out, len);
}

SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_memory_partition(void *h, char *out, uint32_t len) {
    DEV_ENTER(amdsmi_get_gpu_memory_partition);
    if (!modes_here(d)) return AMDSMI_STATUS_NOT_SUPPORTED;
    return partition_string(d->memory_partition, out, len);
}

/* As amd_smi.cc's amdsmi_get_gpu_kfd_info: SUCCESS, each member its own read, all ones where
 * that read failed.  current_partition_id comes from rsmi_dev_partition_id_get: bits [31:28]
 * of the KFD location id, or (non-SPX fallback) its function bits -- the XCP index. */
SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_kfd_info(void *h, amdsmi_kfd_info_t *info) {
    DEV_ENTER(amdsmi_get_gpu_kfd_info); NEED(info);
    memset(info, 0, sizeof *info);
    unsigned idx = (unsigned)(d - g_st->dev);
    info->kfd_id = 0x5eed0000ull + idx; /* KFD's gpu_id */
    info->node_id = idx + 1;            /* KFD topology node (node 0 is the CPU) */
    info->current_partition_id = d->partition_id;
    return AMDSMI_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Readings                                                                 */
/* ------------------------------------------------------------------------ */
SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_activity(void *h, amdsmi_engine_usage_t *u) {
    DEV_ENTER(amdsmi_get_gpu_activity); NEED(u);
    memset(u, 0, sizeof *u);
    /* Copied from the metrics table (amd_smi.cc amdsmi_get_gpu_activity): the socket's. */
    u->gfx_activity = act16(d, R_utilization_gpu);
    u->umc_activity = act16(d, R_utilization_memory);
    u->mm_activity = act16(d, R_utilization_mm);
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_vram_usage(void *h, amdsmi_vram_usage_t *v) {
    DEV_ENTER(amdsmi_get_gpu_vram_usage); NEED(v);
    if (NA(memory_total_mib) || NA(memory_used_mib)) return AMDSMI_STATUS_NOT_SUPPORTED;
    memset(v, 0, sizeof *v);
    /* amdsmi reports MB (2^20 bytes).  Used: the device's one VRAM manager, on every
     * partition.  Total: AMDGPU_INFO_VRAM_GTT's vram_size -- the whole device on every
     * partition on older libraries/kernels (ROCm/ROCm issue 4750, ROCm 6.4: "always show the
     * full GPU memory for each partition"); on newer ones the partition's even share on the
     * secondary partitions and still the whole device on XCP 0 (amd-smi on ROCm 7.0.1:
     * 196592 MB on XCP 0, 98296 MB on XCP 1 of a DPX MI300X, ROCm/k8s-gpu-dra-driver issue 20;
     * rocm-systems PR 8419, still open, would give every partition KFD's share). */
    int share = (d->lib_flags & LIB_VRAM_SPLIT) && d->partition_id != 0;
    /* The whole device: a partition's share times the mode's partitions (not the sum over
     * the partitions served: one may be missing). */
    v->vram_total = mb(share || d->socket1 <= 0 ? RV(memory_total_mib)
                       : RV(memory_total_mib) * socket_partitions(d));
    v->vram_used = mb(socket_sum(d, R_memory_used_mib));
    return AMDSMI_STATUS_SUCCESS;
}

/* rsmi_dev_memory_usage_get: the DRM node's mem_info_vram_used, in bytes.  On a partitioned
 * GPU with a newer library and kernel each XCP's own (amd-smi 26.0.0, ROCm 7.0.1, a DPX MI300X:
 * 283 MB on XCP 0, 492 MB on XCP 1, ROCm/k8s-gpu-dra-driver issue 20); else the device's one VRAM
 * manager's, as amdsmi_get_gpu_vram_usage (modelled, no capture shows it).  Only VRAM: the
 * visible-VRAM and GTT types are not simulated. */
SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_memory_usage(void *h, uint32_t mem_type, uint64_t *used) {
    DEV_ENTER(amdsmi_get_gpu_memory_usage); NEED(used);
    if (mem_type != 0 || NA(memory_used_mib)) return AMDSMI_STATUS_NOT_SUPPORTED;
    double mib = (d->socket1 > 0 && (d->lib_flags & LIB_PART_MEMORY)) ? RV(memory_used_mib)
                                                                       : socket_sum(d, R_memory_used_mib);
    *used = (uint64_t)(mib * 1048576.0);
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_temp_metric(void *h, uint32_t sensor, uint32_t metric, int64_t *value) {
    DEV_ENTER(amdsmi_get_temp_metric); NEED(value);
    if (metric != TEMP_CURRENT) return AMDSMI_STATUS_NOT_SUPPORTED;
    int r = sensor == TEMP_EDGE ? R_temperature_c : sensor == TEMP_HOTSPOT ? R_hotspot_temperature_c
          : sensor == TEMP_VRAM ? R_memory_temperature_c : -1;
    d = socket_dev(d); /* one package, one set of sensors, seen from every partition */
    if (r < 0 || d->na[r]) return AMDSMI_STATUS_NOT_SUPPORTED;
    *value = (int64_t)llround(d->val[r]); /* degrees Celsius */
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_power_info(void *h, amdsmi_power_info_t *p) {
    DEV_ENTER(amdsmi_get_power_info); NEED(p);
    memset(p, 0, sizeof *p);
    /* As a current library: copied from the metrics table, so MI300 (v1.4+) fills
     * current_socket_power and MI200 (v1.3) average_socket_power -- on the GCD that owns the
     * package, 0 W on its sibling; socket_power is whichever is valid.  Unavailable members
     * are UINT32_MAX ("Unsupported struct members are set to UINT32_MAX", amdsmi.h) and a
     * socket_power with nothing behind it is UINT64_MAX.  Every partition of a socket reports
     * the whole socket's power (rocm-smi on a CPX MI300X shows the same watts on all eight:
     * ROCm/ROCm issue 4750; amdsmi's partition doc: socket power "reflects the total physical
     * GPU", ROCm/rocm-systems PR 6701). */
    amd_dev_t *s = socket_dev(d);
    uint32_t watts = s->na[R_power_w] ? AMD_NA32
                   : s->val[R_package_power_here] > 0 ? u32(s->val[R_power_w]) : 0;
    int v13 = RV(gpu_metrics_content_revision) < 4;
    p->current_socket_power = v13 ? AMD_NA32 : watts;
    p->average_socket_power = v13 ? watts : AMD_NA32;
    p->socket_power = watts == AMD_NA32 ? AMD_NA64 : watts;
    p->gfx_voltage = AMD_NA64; p->soc_voltage = AMD_NA64; p->mem_voltage = AMD_NA64;
    p->power_limit = s->na[R_power_limit_w] ? AMD_NA32 : u32(s->val[R_power_limit_w]);
    return AMDSMI_STATUS_SUCCESS;
}

/* The firmware counts energy in 2^-16 J (kgd_pp_interface.h: "15.259uJ (2^-16) units"); the
 * library reports the resolution as 15.3 (rocm_smi.cc kEnergyCounterResolution = 15.3F, amdsmi
 * at 0ceca28), which overstates the energy by 0.27 % to anyone multiplying the two. */
#define ENERGY_UNIT_UJ (1e6 / 65536.0)
#define ENERGY_RESOLUTION_UJ 15.3f
SIM_EXPORT amdsmi_status_t amdsmi_get_energy_count(void *h, uint64_t *acc, float *res, uint64_t *ts) {
    DEV_ENTER(amdsmi_get_energy_count); NEED(acc); NEED(res); NEED(ts);
    d = socket_dev(d); /* the socket's accumulator, the same on every partition */
    if (NA(energy_uj)) return AMDSMI_STATUS_NOT_SUPPORTED;
    *res = ENERGY_RESOLUTION_UJ;
    *acc = (uint64_t)(RV(energy_uj) / ENERGY_UNIT_UJ);
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    *ts = (uint64_t)t.tv_sec * 1000000000ULL + (uint64_t)t.tv_nsec;
    return AMDSMI_STATUS_SUCCESS;
}

static void fill_metrics(amd_dev_t *d, amdsmi_gpu_metrics_t *m);
SIM_EXPORT amdsmi_status_t amdsmi_get_clock_info(void *h, uint32_t type, amdsmi_clk_info_t *c) {
    DEV_ENTER(amdsmi_get_clock_info); NEED(c);
    int r = -1, rmax = -1;
    switch (type) {
    case CLK_GFX: r = R_gfx_clock_mhz; rmax = R_max_gfx_clock_mhz; break;
    case CLK_MEM: r = R_memory_clock_mhz; rmax = R_max_memory_clock_mhz; break;
    case CLK_SOC: r = R_soc_clock_mhz; break;
    case CLK_VCLK0: r = R_video_clock_mhz; break;
    case CLK_DCLK0: r = R_decoder_clock_mhz; break;
    default: return AMDSMI_STATUS_NOT_SUPPORTED;
    }
    if (d->na[r]) return AMDSMI_STATUS_NOT_SUPPORTED;
    /* As amd_smi.cc (0ceca28): the current clock is copied from the metrics table's single
     * current_gfxclk/current_uclk/current_vclk0/current_dclk0 (uint16) into a uint32: on a
     * table that reports clocks per instance (v1.4+, MI300) those are N/A, and the call answers
     * SUCCESS with clk = 0xFFFF -- 65535 MHz to a caller that does not check. */
    amdsmi_gpu_metrics_t t;
    fill_metrics(d, &t);
    uint16_t from_table = type == CLK_GFX ? t.current_gfxclk : type == CLK_MEM ? t.current_uclk
                        : type == CLK_SOC ? t.current_socclk : type == CLK_VCLK0 ? t.current_vclk0
                        : t.current_dclk0;
    memset(c, 0, sizeof *c);
    c->clk = from_table;
    c->min_clk = AMD_NA32;
    c->max_clk = rmax >= 0 ? v32(d, rmax) : AMD_NA32;
    c->clk_locked = 0xFF;
    c->clk_deep_sleep = 0;
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_pcie_info(void *h, amdsmi_pcie_info_t *p) {
    DEV_ENTER(amdsmi_get_pcie_info); NEED(p);
    memset(p, 0, sizeof *p);
    p->pcie_static.max_pcie_width = v16(d, R_pcie_max_link_width);
    p->pcie_static.max_pcie_speed = v32(d, R_pcie_max_link_speed_mts);
    p->pcie_static.pcie_interface_version = AMD_NA32;
    p->pcie_static.slot_type = 1; /* OAM */
    p->pcie_metric.pcie_width = v16(d, R_pcie_link_width);
    p->pcie_metric.pcie_speed = v32(d, R_pcie_link_speed_mts);
    p->pcie_metric.pcie_bandwidth = v32(d, R_pcie_bandwidth_mbps);
    p->pcie_metric.pcie_replay_count = v64(d, R_pcie_replay_counter);
    p->pcie_metric.pcie_l0_to_recovery_count = AMD_NA64;
    p->pcie_metric.pcie_replay_roll_over_count = AMD_NA64;
    p->pcie_metric.pcie_nak_sent_count = AMD_NA64;
    p->pcie_metric.pcie_nak_received_count = AMD_NA64;
    p->pcie_metric.pcie_lc_perf_other_end_recovery_count = AMD_NA32;
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_total_ecc_count(void *h, amdsmi_error_count_t *e) {
    DEV_ENTER(amdsmi_get_gpu_total_ecc_count); NEED(e);
    if (NA(ecc_correctable)) return AMDSMI_STATUS_NOT_SUPPORTED; /* no DRM support */
    memset(e, 0, sizeof *e);
    /* amdsmi sums only the blocks whose RAS feature is enabled: with RAS off it answers
     * SUCCESS and 0/0/0 (amd_smi.cc, amdsmi_get_gpu_total_ecc_count). */
    if (RV(ras_enabled) <= 0) return AMDSMI_STATUS_SUCCESS;
    e->correctable_count = u64(RV(ecc_correctable));
    e->uncorrectable_count = u64(RV(ecc_uncorrectable));
    e->deferred_count = u64(RV(ecc_deferred));
    return AMDSMI_STATUS_SUCCESS;
}

/* The enabled RAS blocks (amdsmi_gpu_block_t bits: UMC, SDMA, GFX).  rocm_smi reads them
 * from the device's ras/features file, which amdgpu creates only with RAS on: with RAS off
 * the read fails with ENOENT and the call answers NOT_SUPPORTED (rsmi_dev_ecc_enabled_get,
 * rocm_smi.cc at 0ceca28), while amdsmi_get_gpu_total_ecc_count answers SUCCESS, 0/0/0. */
SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_ecc_enabled(void *h, uint64_t *blocks) {
    DEV_ENTER(amdsmi_get_gpu_ecc_enabled); NEED(blocks);
    if (NA(ecc_correctable) || RV(ras_enabled) <= 0) return AMDSMI_STATUS_NOT_SUPPORTED;
    *blocks = 0x7ull;
    return AMDSMI_STATUS_SUCCESS;
}

/* Like amdsmi: NOT_SUPPORTED where the table has no residency accumulators (v1.3), else two
 * table reads 100 ms apart (system_wait(kFASTEST_POLL_TIME_MS) in amd_smi.cc): the call
 * holds its thread for 100 ms every time. */
SIM_EXPORT amdsmi_status_t amdsmi_get_violation_status(void *h, amdsmi_violation_status_t *v) {
    DEV_ENTER(amdsmi_get_violation_status); NEED(v);
    if (NA(violation_acc_counter) || RV(gpu_metrics_content_revision) < 6)
        return AMDSMI_STATUS_NOT_SUPPORTED; /* the accumulators came with gpu_metrics v1.6 */
    struct timespec nap = {0, 100 * 1000 * 1000};
    while (nanosleep(&nap, &nap) != 0 && errno == EINTR) {}
    memset(v, 0xFF, sizeof *v); /* everything this firmware does not report is N/A */
    struct timespec t; clock_gettime(CLOCK_REALTIME, &t);
    v->reference_timestamp = (uint64_t)t.tv_sec * 1000000ULL + (uint64_t)t.tv_nsec / 1000ULL;
    v->violation_timestamp = 100000; /* us between the two firmware samples compared */
    v->acc_counter = u64(RV(violation_acc_counter));
    v->acc_prochot_thrm = u64(RV(violation_prochot_acc));
    v->acc_ppt_pwr = u64(RV(violation_ppt_acc));
    v->acc_socket_thrm = u64(RV(violation_socket_thermal_acc));
    v->acc_vr_thrm = u64(RV(violation_vr_thermal_acc));
    v->acc_hbm_thrm = u64(RV(violation_hbm_thermal_acc));
    v->per_prochot_thrm = RV(throttle_prochot) > 0 ? 100 : 0;
    v->per_ppt_pwr = RV(throttle_ppt) > 0 ? 100 : 0;
    v->per_socket_thrm = RV(throttle_socket_thermal) > 0 ? 100 : 0;
    v->per_vr_thrm = RV(throttle_vr_thermal) > 0 ? 100 : 0;
    v->per_hbm_thrm = RV(throttle_hbm_thermal) > 0 ? 100 : 0;
    v->active_prochot_thrm = RV(throttle_prochot) > 0;
    v->active_ppt_pwr = RV(throttle_ppt) > 0;
    v->active_socket_thrm = RV(throttle_socket_thermal) > 0;
    v->active_vr_thrm = RV(throttle_vr_thermal) > 0;
    v->active_hbm_thrm = RV(throttle_hbm_thermal) > 0;
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_power_cap_info(void *h, uint32_t sensor, amdsmi_power_cap_info_t *c) {
    DEV_ENTER(amdsmi_get_power_cap_info); NEED(c);
    if (sensor != 0) return AMDSMI_STATUS_INVAL;
    if (NA(power_limit_w)) return AMDSMI_STATUS_NOT_SUPPORTED;
    memset(c, 0, sizeof *c);
    c->power_cap = u64(RV(power_limit_w) * 1e6); /* microwatts */
    c->default_power_cap = u64(RV(power_default_limit_w) * 1e6);
    c->dpm_cap = 0;
    c->min_power_cap = u64(RV(power_min_limit_w) * 1e6);
    c->max_power_cap = u64(RV(power_max_limit_w) * 1e6);
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_fan_speed(void *h, uint32_t sensor, int64_t *speed) {
    DEV_ENTER(amdsmi_get_gpu_fan_speed); NEED(speed);
    if (sensor != 0 || NA(fan_percent)) return AMDSMI_STATUS_NOT_SUPPORTED;
    *speed = (int64_t)llround(RV(fan_percent) * 255.0 / 100.0); /* 0..AMDSMI_MAX_FAN_SPEED */
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_fan_speed_max(void *h, uint32_t sensor, uint64_t *max) {
    DEV_ENTER(amdsmi_get_gpu_fan_speed_max); NEED(max);
    if (sensor != 0 || NA(fan_percent)) return AMDSMI_STATUS_NOT_SUPPORTED;
    *max = 255;
    return AMDSMI_STATUS_SUCCESS;
}

/* As amdsmi: the table's per-link counters copied as they are, num_links always
 * AMDSMI_MAX_NUM_XGMI_LINKS (amd_smi.cc).  A table without XGMI fields (v1.3, or a part with
 * no links) gives SUCCESS and all ones. */
#define AMDSMI_MAX_NUM_XGMI_LINKS 8
SIM_EXPORT amdsmi_status_t amdsmi_get_link_metrics(void *h, amdsmi_link_metrics_t *m) {
    DEV_ENTER(amdsmi_get_link_metrics); NEED(m);
    amdsmi_gpu_metrics_t t;
    fill_metrics(d, &t);
    memset(m, 0, sizeof *m);
    m->num_links = AMDSMI_MAX_NUM_XGMI_LINKS;
    for (unsigned i = 0; i < AMDSMI_MAX_NUM_XGMI_LINKS; i++) {
        m->links[i].bit_rate = t.xgmi_link_speed;
        m->links[i].max_bandwidth = t.xgmi_link_width;
        m->links[i].link_type = 2; /* XGMI */
        m->links[i].read = t.xgmi_read_data_acc[i];
        m->links[i].write = t.xgmi_write_data_acc[i];
    }
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_xgmi_info(void *h, amdsmi_xgmi_info_t *x) {
    DEV_ENTER(amdsmi_get_xgmi_info); NEED(x);
    if (NA(xgmi_links) || RV(xgmi_links) <= 0) return AMDSMI_STATUS_NOT_SUPPORTED;
    memset(x, 0, sizeof *x);
    x->xgmi_lanes = 16;
    x->xgmi_hive_id = 0x5a11ab1e;
    x->xgmi_node_id = (uint64_t)(d - g_st->dev);
    x->index = (uint32_t)(d - g_st->dev);
    return AMDSMI_STATUS_SUCCESS;
}

/* The firmware's metrics table as amdsmi returns it: amdsmi_gpu_metrics_t starts all ones
 * and only the fields of the ASIC's own table version are copied in.
 *  - v1.3 (gpu_metrics_v1_3, kgd_pp_interface.h; MI200: aldebaran): one current_gfxclk,
 *    average_socket_power (the package's, on the GCD that owns it, 0 on its sibling), no
 *    current_socket_power, no XGMI, PCIe replay or throttle-residency fields.
 *  - v1.4/v1.5 (gpu_metrics_v1_4/_5; MI300: smu_v13_0_6): per-XCC gfx clocks,
 *    current_socket_power, XGMI per link, PCIe accumulators, residency accumulators.
 * Energy counts 15.259 uJ; XGMI data in KB; clocks in MHz. */
static uint16_t m16(amd_dev_t *d, int r) { return d->na[r] ? 0xFFFF : (uint16_t)(u32(d->val[r]) > 0xFFFE ? 0xFFFE : u32(d->val[r])); }
static void fill_metrics(amd_dev_t *d, amdsmi_gpu_metrics_t *m) {
    memset(m, 0xFF, sizeof *m);
    unsigned content = NA(gpu_metrics_content_revision) ? 5u : u32(RV(gpu_metrics_content_revision));
    int v13 = content < 4;
    m->common_header.structure_size = (uint16_t)sizeof *m;
    m->common_header.format_revision = 1;
    m->common_header.content_revision = (uint8_t)content;
    /* Socket-level fields (temperatures, socket power, energy) are the package's on every
     * partition; activity is the partition's own (per-XCP metrics at the processor level). */
    amd_dev_t *s = socket_dev(d);
    m->temperature_edge = m16(s, R_temperature_c);
    m->temperature_hotspot = m16(s, R_hotspot_temperature_c);
    m->temperature_mem = m16(s, R_memory_temperature_c);
    m->average_gfx_activity = act16(d, R_utilization_gpu);
    m->average_umc_activity = act16(d, R_utilization_memory);
    m->average_mm_activity = act16(d, R_utilization_mm);
    uint16_t watts = s->val[R_package_power_here] > 0 ? m16(s, R_power_w)
                   : (s->na[R_power_w] ? 0xFFFF : 0);
    if (v13) m->average_socket_power = watts;
    else m->current_socket_power = watts;
    m->energy_accumulator = s->na[R_energy_uj] ? AMD_NA64
                          : (uint64_t)(s->val[R_energy_uj] / ENERGY_UNIT_UJ);
    struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t);
    m->system_clock_counter = (uint64_t)t.tv_sec * 100000000ULL + (uint64_t)t.tv_nsec / 10ULL;
    m->firmware_timestamp = m->system_clock_counter;
    m->current_uclk = m16(d, R_memory_clock_mhz);
    m->pcie_link_width = m16(d, R_pcie_link_width);
    m->pcie_link_speed = NA(pcie_link_speed_mts) ? 0xFFFF : (uint16_t)(RV(pcie_link_speed_mts) / 100); /* 0.1 GT/s */
    if (v13) {
        /* aldebaran_ppt.c fills indep_throttle_status (SMU_THROTTLER_* bits, amdgpu_smu.h):
         * PPT0 0, TEMP_GPU 32, TEMP_MEM 34, TEMP_VR_GFX 38, PROCHOT_GFX 47. */
        m->indep_throttle_status = (RV(throttle_ppt) > 0 ? 1ull : 0) |
            (RV(throttle_socket_thermal) > 0 ? 1ull << 32 : 0) |
            (RV(throttle_hbm_thermal) > 0 ? 1ull << 34 : 0) |
            (RV(throttle_vr_thermal) > 0 ? 1ull << 38 : 0) |
            (RV(throttle_prochot) > 0 ? 1ull << 47 : 0);
        m->current_gfxclk = m16(d, R_gfx_clock_mhz);
        m->current_socclk = m16(d, R_soc_clock_mhz);
        m->current_vclk0 = m16(d, R_video_clock_mhz);
        m->current_dclk0 = m16(d, R_decoder_clock_mhz);
        return;
    }
    /* MI300 reports per-XCC GFX clocks (current_gfxclks) and leaves current_gfxclk N/A. */
    for (int i = 0; i < 8; i++) m->current_gfxclks[i] = m16(d, R_gfx_clock_mhz);
    m->current_socclks[0] = m16(d, R_soc_clock_mhz);
    m->current_vclk0s[0] = m16(d, R_video_clock_mhz);
    m->current_dclk0s[0] = m16(d, R_decoder_clock_mhz);
    m->pcie_replay_count_acc = v64(d, R_pcie_replay_counter);
    unsigned links = NA(xgmi_links) ? 0 : u32(RV(xgmi_links));
    if (links > 8) links = 8;
    if (links) { m->xgmi_link_width = 16; m->xgmi_link_speed = 32; }
    uint64_t rd = u64(RV(xgmi_read_kb)), wr = u64(RV(xgmi_write_kb));
    for (unsigned i = 0; i < links; i++) {
        m->xgmi_read_data_acc[i] = rd / links + (i < rd % links);
        m->xgmi_write_data_acc[i] = wr / links + (i < wr % links);
        m->xgmi_link_status[i] = 1;
    }
    if (content < 6) return; /* v1.4/v1.5: no residency accumulators, no per-XCP stats */
    if (!NA(violation_acc_counter)) {
        m->accumulation_counter = u64(RV(violation_acc_counter));
        m->ppt_residency_acc = u64(RV(violation_ppt_acc));
        m->socket_thm_residency_acc = u64(RV(violation_socket_thermal_acc));
        m->vr_thm_residency_acc = u64(RV(violation_vr_thermal_acc));
        m->hbm_thm_residency_acc = u64(RV(violation_hbm_thermal_acc));
        m->prochot_residency_acc = u64(RV(violation_prochot_acc));
    }
    /* v1.6: one xcp_stats entry per partition of the socket, by partition id, with the busy
     * of each of its XCCs (an MI300X has 8: CPX 1 per partition, DPX 4; amd-smi on a DPX
     * MI300X shows 4 values and 4 N/A per XCP, ROCm/amdsmi issue 134). */
    unsigned parts = socket_partitions(d);
    unsigned xccs = parts >= 8 ? 1 : 8 / parts;
    m->num_partition = 0;
    int sock = socket_of((unsigned)(d - g_st->dev));
    for (unsigned i = 0; i < g_st->n_devices; i++) {
        amd_dev_t *x = &g_st->dev[i];
        if (socket_of(i) != sock || x->partition_id >= 8) continue;
        m->num_partition++;
        for (unsigned k = 0; k < xccs; k++)
            m->xcp_stats[x->partition_id].gfx_busy_inst[k] =
                x->na[R_utilization_gpu] ? AMD_NA32 : u32(x->val[R_utilization_gpu]);
    }
}

SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_metrics_info(void *h, amdsmi_gpu_metrics_t *m) {
    DEV_ENTER(amdsmi_get_gpu_metrics_info); NEED(m);
    fill_metrics(d, m);
    return AMDSMI_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Processes                                                                */
/* ------------------------------------------------------------------------ */
/* Newer ROCm names a process by its executable's path (amd-smi process shows
 * "NAME: /usr/bin/python3.12"), older ones by its comm. */
static void proc_name(uint32_t pid, char *out, size_t len) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%u/exe", pid);
    ssize_t n = readlink(path, out, len - 1);
    out[n > 0 ? n : 0] = 0;
}

/* Like amdsmi: *max_processes in = capacity, out = how many exist; a short buffer is filled
 * and answered with AMDSMI_STATUS_OUT_OF_RESOURCES. */
SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_process_list(void *h, uint32_t *max_processes, amdsmi_proc_info_t *list) {
    DEV_ENTER(amdsmi_get_gpu_process_list); NEED(max_processes);
    int idx = (int)(d - g_st->dev);
    amd_proc_t snap[256];
    unsigned n = 0;
    for (int tries = 0; tries < 100; tries++) {
        uint32_t g1 = __atomic_load_n(&g_st->proc_gen, __ATOMIC_ACQUIRE);
        if (g1 & 1) { sched_yield(); continue; }
        n = 0;
        for (int i = 0; i < AMD_MAX_PROC && n < 256; i++)
            if (g_st->proc[i].dev == idx) snap[n++] = g_st->proc[i];
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&g_st->proc_gen, __ATOMIC_ACQUIRE) == g1) break;
    }
    uint32_t cap = *max_processes;
    *max_processes = n;
    if (!list) return cap == 0 && n > 0 ? AMDSMI_STATUS_OUT_OF_RESOURCES : AMDSMI_STATUS_SUCCESS;
    unsigned k = n < cap ? n : cap;
    for (unsigned i = 0; i < k; i++) {
        amdsmi_proc_info_t *p = &list[i];
        memset(p, 0, sizeof *p);
        proc_name(snap[i].pid, p->name, sizeof p->name);
        p->pid = snap[i].pid;
        /* fdinfo prints KiB; amdsmi's fdinfo.cc has turned them into bytes three ways:
         * x 1024 at ROCm/amdsmi 0ceca28 (the library of ROCm 6.3, 24.x), x 1000 at 0e0d8b7
         * ("info.memory_usage.vram_mem += mem * 1000": 2.3 % short of the bytes) and x kKiB
         * again in rocm-systems (5b3c8b5).  Which releases carry 0e0d8b7 rests on reading:
         * modelled as libraries 25.x-26.11 (ROCm 6.4-7.11), x 1024 before and from 26.12. */
        uint64_t per_kib = kib_factor();
        p->memory_usage.gtt_mem = snap[i].gtt_bytes / 1024 * per_kib;
        p->memory_usage.cpu_mem = snap[i].cpu_bytes / 1024 * per_kib;
        p->memory_usage.vram_mem = snap[i].vram_bytes / 1024 * per_kib;
        p->mem = p->memory_usage.vram_mem + p->memory_usage.gtt_mem + p->memory_usage.cpu_mem;
        p->engine_usage.gfx = (uint64_t)snap[i].gfx_ns;
        p->engine_usage.enc = (uint64_t)snap[i].enc_ns;
        p->cu_occupancy = snap[i].cu_occupancy;
    }
    return n > cap ? AMDSMI_STATUS_OUT_OF_RESOURCES : AMDSMI_STATUS_SUCCESS;
}

/* ------------------------------------------------------------------------ */
/* Event notification (the KFD SMI event file, here a ring in the state)   */
/* ------------------------------------------------------------------------ */
SIM_EXPORT amdsmi_status_t amdsmi_init_gpu_event_notification(void *h) {
    DEV_ENTER(amdsmi_init_gpu_event_notification);
    int idx = (int)(d - g_st->dev);
    pthread_mutex_lock(&g_evt_lock);
    int first = 1;
    for (int i = 0; i < AMD_MAX_DEV; i++) if (g_evt_init[i]) first = 0;
    if (first) g_evt_last_seq = __atomic_load_n(&g_st->ev_seq, __ATOMIC_ACQUIRE);
    g_evt_init[idx] = 1;
    g_evt_mask[idx] = 0;
    pthread_mutex_unlock(&g_evt_lock);
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_set_gpu_event_notification_mask(void *h, uint64_t mask) {
    DEV_ENTER(amdsmi_set_gpu_event_notification_mask);
    int idx = (int)(d - g_st->dev);
    if (!g_evt_init[idx]) return AMDSMI_STATUS_NOT_INIT;
    __atomic_store_n(&g_evt_mask[idx], mask, __ATOMIC_RELEASE);
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_stop_gpu_event_notification(void *h) {
    int idx = handle_index(h);
    simamd_count_call(FN_amdsmi_stop_gpu_event_notification, idx);
    if (!g_st || g_init_count <= 0) return AMDSMI_STATUS_NOT_INIT;
    if (idx < 0) return AMDSMI_STATUS_INVAL;
    g_evt_init[idx] = 0;
    g_evt_mask[idx] = 0;
    return AMDSMI_STATUS_SUCCESS;
}

/* Blocks up to timeout_ms for events of the initialised devices whose mask bit
 * (1 << (type - 1)) is set; returns what arrived (up to *num_elem), else NO_DATA. */
SIM_EXPORT amdsmi_status_t amdsmi_get_gpu_event_notification(int32_t timeout_ms, uint32_t *num_elem,
                                                             amdsmi_evt_notification_data_t *data) {
    SYS_ENTER(amdsmi_get_gpu_event_notification);
    NEED(num_elem); NEED(data);
    if (*num_elem == 0) return AMDSMI_STATUS_INVAL;
    uint64_t deadline = mono_ms() + (uint64_t)(timeout_ms < 0 ? 0 : timeout_ms);
    uint32_t got = 0;
    for (;;) {
        uint32_t fw = __atomic_load_n(&g_st->ev_futex, __ATOMIC_ACQUIRE);
        uint64_t cur = __atomic_load_n(&g_st->ev_seq, __ATOMIC_ACQUIRE);
        pthread_mutex_lock(&g_evt_lock);
        uint64_t s = ring_first(g_evt_last_seq, cur);
        const amd_event_t *e;
        while (got < *num_elem && (e = ring_next(&s, cur)) != NULL) {
            int dv = e->dev;
            uint32_t ty = e->type;
            if (dv >= 0 && dv < AMD_MAX_DEV && g_evt_init[dv] && ty >= 1 && ty <= 64 &&
                (__atomic_load_n(&g_evt_mask[dv], __ATOMIC_ACQUIRE) & (1ull << (ty - 1)))) {
                amdsmi_evt_notification_data_t *out = &data[got++];
                memset(out, 0, sizeof *out);
                out->processor_handle = &g_handles[dv];
                out->event = ty;
                copy_str(out->message, sizeof out->message, e->message);
            }
        }
        g_evt_last_seq = s;
        pthread_mutex_unlock(&g_evt_lock);
        if (got) { *num_elem = got; return AMDSMI_STATUS_SUCCESS; }
        uint64_t now = mono_ms();
        if (now >= deadline) { *num_elem = 0; return AMDSMI_STATUS_NO_DATA; }
        futex_wait(&g_st->ev_futex, fw, (long)(deadline - now));
    }
}

/* ------------------------------------------------------------------------ */
/* Misc                                                                     */
/* ------------------------------------------------------------------------ */
SIM_EXPORT amdsmi_status_t amdsmi_status_code_to_string(amdsmi_status_t status, const char **str) {
    simamd_count_call(FN_amdsmi_status_code_to_string, -1);
    NEED(str);
    switch (status) {
    case AMDSMI_STATUS_SUCCESS: *str = "AMDSMI_STATUS_SUCCESS: Call succeeded"; break;
    case AMDSMI_STATUS_NOT_SUPPORTED: *str = "AMDSMI_STATUS_NOT_SUPPORTED: Feature not supported"; break;
    case AMDSMI_STATUS_NOT_FOUND: *str = "AMDSMI_STATUS_NOT_FOUND: Device Not found"; break;
    case AMDSMI_STATUS_NO_DATA: *str = "AMDSMI_STATUS_NO_DATA: No data was found for a given input"; break;
    default: *str = "AMDSMI_STATUS_UNKNOWN_ERROR: An unknown error occurred"; break;
    }
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT amdsmi_status_t amdsmi_get_lib_version(amdsmi_version_t *v) {
    simamd_count_call(FN_amdsmi_get_lib_version, -1);
    NEED(v);
    v->major = g_st && g_st->lib_major ? g_st->lib_major : 26;
    v->minor = g_st ? g_st->lib_minor : 0;
    v->release = g_st ? g_st->lib_release : 0;
    v->build = "simulated";
    return AMDSMI_STATUS_SUCCESS;
}

SIM_EXPORT void amdsmi_free_name_value_pairs(void *p) {
    simamd_count_call(FN_amdsmi_free_name_value_pairs, -1);
    (void)p;
}

/* ======================================================================== */
/* Control API for the node daemon (simamd_*): 0 on success, < 0 on error.  */
/* ======================================================================== */
/* The rest (setters, process removal, counters) is in simcore_state.h. */
SIM_EXPORT int simamd_function_count(void) { return FN_IMPLEMENTED + simamd_stub_count; }
SIM_EXPORT const char *simamd_function_name(int i) {
    if (i >= 0 && i < FN_IMPLEMENTED) return g_func_names_impl[i];
    if (i >= FN_IMPLEMENTED && i < FN_IMPLEMENTED + simamd_stub_count) return simamd_stub_names[i - FN_IMPLEMENTED];
    return NULL;
}

SIM_EXPORT int simamd_create(const char *path, int n_devices) {
    if (n_devices < 0 || n_devices > AMD_MAX_DEV) return -1;
    if (FN_IMPLEMENTED + simamd_stub_count > FN_MAX) return -3;
    g_ctl = map_state(path, 1, (unsigned)n_devices);
    return g_ctl ? 0 : -2;
}
SIM_EXPORT int simamd_set_lib_version(unsigned major, unsigned minor, unsigned release) {
    if (!g_ctl) return -1;
    g_ctl->lib_major = major; g_ctl->lib_minor = minor; g_ctl->lib_release = release;
    return 0;
}
SIM_EXPORT int simamd_set_system(const char *driver, const char *date) {
    if (!g_ctl) return -1;
    snprintf(g_ctl->driver_version, sizeof g_ctl->driver_version, "%s", driver);
    snprintf(g_ctl->driver_date, sizeof g_ctl->driver_date, "%s", date);
    return 0;
}
SIM_EXPORT int simamd_set_string(int dev, const char *key, const char *value) {
    amd_dev_t *d = ctl_dev(dev);
    if (!d || !key || !value) return -1;
    if (strcmp(key, "name") == 0) snprintf(d->name, sizeof d->name, "%s", value);
    else if (strcmp(key, "uuid") == 0) snprintf(d->uuid, sizeof d->uuid, "%s", value);
    else if (strcmp(key, "serial") == 0) snprintf(d->serial, sizeof d->serial, "%s", value);
    else if (strcmp(key, "vbios") == 0) snprintf(d->vbios, sizeof d->vbios, "%s", value);
    else return -2;
    return 0;
}
SIM_EXPORT int simamd_set_bdf(int dev, unsigned long long domain, unsigned bus, unsigned device, unsigned function) {
    amd_dev_t *d = ctl_dev(dev);
    if (!d || bus > 0xFF || device > 0x1F || function > 7) return -1;
    amdsmi_bdf_t b; b.as_uint = 0;
    b.f.domain_number = domain; b.f.bus_number = bus; b.f.device_number = device; b.f.function_number = function;
    d->bdf = b.as_uint;
    return 0;
}
/* Makes ``dev`` compute partition ``partition_id`` of the socket whose primary is ``socket``. */
SIM_EXPORT int simamd_set_partition(int dev, int socket, unsigned partition_id, const char *compute,
                                    const char *memory, unsigned uuid_per_partition,
                                    unsigned lib_flags) {
    amd_dev_t *d = ctl_dev(dev);
    if (!d || !ctl_dev(socket) || socket > dev || partition_id > 15 || !compute || !memory) return -1;
    d->socket1 = socket + 1;
    d->partition_id = partition_id;
    d->uuid_per_partition = uuid_per_partition != 0;
    d->lib_flags = lib_flags;
    snprintf(d->compute_partition, sizeof d->compute_partition, "%s", compute);
    snprintf(d->memory_partition, sizeof d->memory_partition, "%s", memory);
    return 0;
}
SIM_EXPORT int simamd_set_reset(int dev, unsigned status) {
    amd_dev_t *d = ctl_dev(dev);
    if (!d) return -1;
    __atomic_store_n(&d->reset_status, status, __ATOMIC_RELEASE);
    return 0;
}
SIM_EXPORT int simamd_bump(int dev, int rid, double by) {
    amd_dev_t *d = ctl_dev(dev);
    if (!d || rid < 0 || rid >= R_COUNT || !isfinite(by)) return -1;
    bump(d, rid, by);
    return 0;
}

SIM_EXPORT long long simamd_push_event(int dev, unsigned type, const char *message) {
    amd_dev_t *d = ctl_dev(dev);
    if (!d || type < 1 || type > EVT_LAST) return -1;
    uint64_t s;
    amd_event_t *e = ring_claim(dev, &s);
    e->type = type;
    snprintf(e->message, sizeof e->message, "%s", message ? message : "");
    return ring_publish(e, s);
}

/* Adds or updates (pid, dev); the engine-time counters of an existing entry carry on. */
SIM_EXPORT int simamd_proc_add(int dev, unsigned pid, double vram_mib, double gfx_util, double enc_util, unsigned cu, unsigned drm) {
    if (!ctl_dev(dev) || pid == 0) return -1;
    int existing;
    int slot = proc_slot(dev, pid, &existing);
    if (slot < 0) return -3;
    proc_write_begin();
    amd_proc_t *p = &g_ctl->proc[slot];
    if (!existing) { memset(p, 0, sizeof *p); p->pid = pid; }
    p->vram_bytes = u64(vram_mib * 1048576.0);
    p->gtt_bytes = 2 * 1048576ull;
    p->cpu_bytes = 0;
    p->gfx_util = gfx_util; p->enc_util = enc_util; p->cu_occupancy = cu; p->drm = drm;
    p->dev = dev;
    proc_write_end();
    return 0;
}
/* Advances the counters by dt seconds.  The violation accumulators tick once per ms, the
 * period of the firmware's accumulation counter. */
SIM_EXPORT int simamd_tick(double dt) {
    if (!g_ctl || !(dt >= 0)) return -1;
    for (unsigned i = 0; i < g_ctl->n_devices; i++) {
        amd_dev_t *d = &g_ctl->dev[i];
        if (d->lost) continue;
        if (!NA(power_w) && !NA(energy_uj)) bump(d, R_energy_uj, RV(power_w) * 1e6 * dt);
        if (!NA(xgmi_links) && RV(xgmi_links) > 0) {
            bump(d, R_xgmi_read_kb, RV(xgmi_read_kb_s) * dt);
            bump(d, R_xgmi_write_kb, RV(xgmi_write_kb_s) * dt);
        }
        if (!NA(violation_acc_counter)) {
            double ticks = dt * 1000.0;
            bump(d, R_violation_acc_counter, ticks);
            if (RV(throttle_ppt) > 0) bump(d, R_violation_ppt_acc, ticks);
            if (RV(throttle_socket_thermal) > 0) bump(d, R_violation_socket_thermal_acc, ticks);
            if (RV(throttle_vr_thermal) > 0) bump(d, R_violation_vr_thermal_acc, ticks);
            if (RV(throttle_hbm_thermal) > 0) bump(d, R_violation_hbm_thermal_acc, ticks);
            if (RV(throttle_prochot) > 0) bump(d, R_violation_prochot_acc, ticks);
        }
    }
    proc_write_begin();
    for (int i = 0; i < AMD_MAX_PROC; i++) {
        amd_proc_t *p = &g_ctl->proc[i];
        if (p->dev < 0 || g_ctl->dev[p->dev].lost) continue;
        /* engine_usage comes from DRM fdinfo: work a HIP process submits through /dev/kfd
         * (user-mode queues) is not counted there, however busy the GPU is. */
        if (!p->drm) continue;
        p->gfx_ns += p->gfx_util / 100.0 * dt * 1e9;
        p->enc_ns += p->enc_util / 100.0 * dt * 1e9;
    }
    proc_write_end();
    return 0;
}

/* Called by the generated stubs: their counters follow the implemented functions. */
SIM_EXPORT void simamd_count_stub(int i) { simamd_count_call(FN_IMPLEMENTED + i, -1); }
