/*
 * MIG (Multi-Instance GPU) state of the simulated NVML: the shared-memory types, included by
 * libnvml_sim.c inside its state layout.  The functions are in nvml_sim_mig.c.
 *
 * A MIG-enabled GPU holds up to SIM_MAX_MIG MIG devices.  A MIG device is one compute
 * instance ("A MIG device handle ... maps to a MIG compute instance", nvml.h); a GPU instance
 * holds one or several of them (each compute instance takes at least one compute slice of 7,
 * so a GPU never has more than seven).  The slot of a MIG device is its MIG device index
 * (nvmlDeviceGetMigDeviceHandleByIndex, nvmlDeviceGetIndex on its handle): slots may stay
 * empty below the highest one in use (a hole answers NOT_FOUND), as on real GPUs.  Each slot
 * carries a full sim_dev_t of its own (name, MIG- UUID, readings, per-function "not supported"
 * flags), so the ordinary entry points serve a MIG handle from its own readings; memory
 * belongs to the GPU instance, so the node writes the same memory readings into every
 * compute instance of one GPU instance.
 */
#ifndef NVML_SIM_MIG_TYPES_H
#define NVML_SIM_MIG_TYPES_H

#define SIM_MAX_MIG 7            /* A100 / H100 / H200: at most seven GPU instances */
#define SIM_MIG_PROFILE 32
#define SIM_MIG_NONE 0xFFFFFFFFu /* NVML's "no instance" in process and event records */

typedef struct {
    int32_t active;              /* 0: destroyed (its handle answers INVALID_ARGUMENT) */
    uint32_t gi_id;              /* GPU instance id (nvmlDeviceGetGpuInstanceId) */
    uint32_t ci_id;              /* compute instance id, unique within its GPU instance */
    uint32_t profile_id;         /* NVML_GPU_INSTANCE_PROFILE_* of its GPU instance */
    uint32_t slices;             /* GPU instance slice count */
    uint32_t ci_slices;          /* compute instance slice count (<= slices) */
    char profile[SIM_MIG_PROFILE]; /* the MIG device's profile: "3g.40gb", "1c.3g.40gb" */
    sim_dev_t dev;               /* what a MIG handle's calls read */
} sim_mig_t;

typedef struct {
    int32_t enabled;             /* nvmlDeviceGetMigMode */
    uint32_t gen;                /* bumped on every reconfiguration */
    sim_mig_t inst[SIM_MAX_MIG]; /* by slot; a handle names a slot */
} sim_mig_dev_t;

#endif
