"""The metric catalog: every name the agent emits, defined once.

The OTLP encoder, the Prometheus exporter and ``docs/metrics.md`` all read this table, so a
name, unit or instrument cannot differ between what is documented and what is sent. Names and
units are the public contract of ``shared/specs/telemetry.md``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Instrument(enum.Enum):
    """OpenTelemetry instrument kinds, which decide the OTLP data type."""

    GAUGE = "gauge"
    COUNTER = "counter"  # cumulative monotonic Sum
    UPDOWNCOUNTER = "updowncounter"  # cumulative non-monotonic Sum


@dataclass(frozen=True)
class MetricSpec:
    name: str
    instrument: Instrument
    unit: str
    description: str
    attributes: tuple[str, ...] = ()
    group: str = ""  # the metric group that produces it; "" = produced by the agent itself
    # Which backends provide it (an integration test checks this against what each serves),
    # and how a vendor's source differs where that matters to a reader of the chart.
    vendors: tuple[str, ...] = ("nvidia", "amd")
    vendor_notes: tuple[tuple[str, str], ...] = ()



G, C, U = Instrument.GAUGE, Instrument.COUNTER, Instrument.UPDOWNCOUNTER

# Measurements in these units go out as doubles (OTLP as_double), whatever type the library
# served: NVML's temperatures are unsigned ints, amdsmi's watts and degrees ints, the
# simulated node's whatever its scenario wrote. One metric, one value type on every device
# (an OpenTelemetry SDK instrument is int or float, never both; a backend may keep the first
# type it saw). Counts (bytes, {error}, ...), states and clocks (whole hertz) stay as read.
DOUBLE_UNITS = frozenset({"W", "Cel", "J", "s"})
NVIDIA_ONLY = ("nvidia",)
AMD_ONLY = ("amd",)

DEVICE_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("hw.gpu.utilization", G, "1", "Fraction of time the GPU engine was busy.",
          ("hw.gpu.task",), "fast (general), slow (encoder, decoder)",
          vendor_notes=(("amd", "`general` is GFX activity; no `encoder`/`decoder` (the "
                                "multimedia engine is gpu.multimedia.utilization)"),)),
    MetricSpec("gpu.multimedia.utilization", G, "1",
          "Fraction of time the multimedia engine (AMD VCN: video decode and encode, JPEG) "
          "was busy.", (), "fast", vendors=AMD_ONLY,
          vendor_notes=(("amd", "amdsmi mm_activity"),)),
    MetricSpec("hw.gpu.memory.utilization", G, "1",
          "Fraction of GPU memory used: hw.gpu.memory.usage / hw.gpu.memory.limit of the same "
          "read.", (), "fast"),
    MetricSpec("gpu.memory.controller.utilization", G, "1",
          "Fraction of time the memory controller was busy reading or writing memory.", (),
          "fast", vendor_notes=(("nvidia", "nvmlUtilization_t.memory (dcgm MEM_COPY_UTIL)"),
                                ("amd", "UMC activity"))),
    MetricSpec("hw.gpu.memory.usage", U, "By",
          "GPU memory used: frame buffer allocated, excluding what the driver reserves "
          "(gpu.memory.reserved).", (), "fast",
          vendor_notes=(("nvidia", "nvmlMemory_v2_t.used; on drivers without "
                                   "nvmlDeviceGetMemoryInfo_v2 the v1 figure, which includes "
                                   "the reserve (gpu.memory.reserved is absent there)"),)),
    MetricSpec("hw.gpu.memory.limit", U, "By", "Total frame buffer memory.", (), "fast"),
    MetricSpec("gpu.memory.reserved", U, "By", "Frame buffer memory reserved by the driver.", (),
          "fast", vendors=NVIDIA_ONLY),
    MetricSpec("hw.gpu.io", C, "By",
          "Bytes the GPU received and transmitted over PCIe. GPU-to-GPU links are not in it: "
          "NVLink is gpu.nvlink.io, AMD XGMI gpu.xgmi.io (so a sum of the three is all the "
          "GPU's traffic, none counted twice).", ("network.io.direction",), "fast",
          vendors=NVIDIA_ONLY),
    MetricSpec("hw.temperature", G, "Cel", "Temperature.", ("hw.sensor_location",), "fast",
          vendor_notes=(("amd", "`gpu` is the junction (hotspot) sensor; the edge sensor is "
                                "`edge` (absent on MI300); `memory` is VRAM/HBM"),)),
    MetricSpec("hw.power", G, "W", "Power draw at the moment it is read (instantaneous).", (),
          "fast",
          vendor_notes=(("nvidia", "NVML_FI_DEV_POWER_INSTANT (\"Current GPU power\"; dcgm's "
                                   "DCGM_FI_DEV_POWER_USAGE_INSTANT). Only on a driver without "
                                   "that field (before R535) nvmlDeviceGetPowerUsage, which "
                                   "Ampere (except GA100) and newer average over 1 s. The `dcgm` "
                                   "Prometheus scheme serves it as DCGM_FI_DEV_POWER_USAGE, "
                                   "which dcgm-exporter fills from nvmlDeviceGetPowerUsage (the "
                                   "1 s average there)"),
                        ("amd", "socket power"))),
    MetricSpec("hw.energy", C, "J", "Energy consumed since the driver was loaded.", (), "fast",
          vendor_notes=(("amd", "energy accumulator x counter resolution"),)),
    MetricSpec("gpu.clock.frequency", G, "Hz", "Clock frequency.", ("gpu.clock.domain",),
          "fast (sm), slow (memory, graphics, video)",
          vendor_notes=(("amd", "no `sm`: GFX clock is `graphics` (fast group), UMC `memory`, "
                                "VCLK0 `video`"),)),
    MetricSpec("gpu.power.limit", G, "W", "Enforced power limit.", (), "slow"),
    MetricSpec("gpu.nvlink.io", C, "By", "NVLink traffic over all links.",
          ("network.io.direction",), "slow", vendors=NVIDIA_ONLY),
    MetricSpec("gpu.clock.throttle", U, "1", "1 while the clock-event reason is active, else 0.",
          ("gpu.clock.throttle.reason",), "slow",
          vendor_notes=(("amd", "reasons `ppt_power`, `socket_thermal`, `vr_thermal`, "
                                "`hbm_thermal`, `prochot` (amdsmi violation status)"),)),
    MetricSpec("gpu.violation.time", C, "s",
          "Time clocks were held below target by a policy: `power`, `thermal`, `sync_boost`, "
          "`board_limit`, `low_utilization`, `reliability`, and the clock-event reasons "
          "`sw_thermal_slowdown`, `hw_thermal_slowdown`, `hw_power_brake_slowdown` (which "
          "overlap `thermal` and `power`: do not sum across policies).",
          ("gpu.violation.policy",), "slow", vendors=NVIDIA_ONLY),
    MetricSpec("hw.fan.speed_ratio", G, "1",
          "Fan speed as a fraction of its maximum. The fan is a component of its own: "
          "`hw.id` = the GPU's id + `/fan0`, `hw.parent` = the GPU's id.", (),
          "slow",
          vendor_notes=(("nvidia", "nvmlDeviceGetFanSpeed (the intended speed of fan 0)"),
                        ("amd", "absent on Instinct parts (passively cooled)"))),
    MetricSpec("gpu.performance_state", G, "{pstate}",
          "Performance state (P-state number, 0-15); absent while the driver reports it "
          "unknown.", (), "slow",
          vendors=NVIDIA_ONLY),
    MetricSpec("gpu.pcie.replay", C, "{replay}", "PCIe replay count.", (), "slow"),
    MetricSpec("gpu.pcie.replay_rollovers", C, "{rollover}",
          "PCIe replay-number rollovers: a packet replayed until the replay counter rolled "
          "over, after which the link retrains (NVML's PCIe replay rollover counter).", (),
          "slow", vendors=NVIDIA_ONLY),
    MetricSpec("gpu.pcie.link.generation", G, "{generation}",
          "Current PCIe link generation (idle GPUs may lower it to save power).", (), "slow",
          vendor_notes=(("amd", "amdsmi pcie_speed / max_pcie_speed (MT/s) as the "
                                "generation of that lane rate"),)),
    MetricSpec("gpu.pcie.link.max_generation", G, "{generation}",
          "Highest PCIe link generation the GPU and its slot allow together.", (), "slow",
          vendor_notes=(("amd", "amdsmi pcie_speed / max_pcie_speed (MT/s) as the "
                                "generation of that lane rate"),)),
    MetricSpec("gpu.pcie.link.width", G, "{lane}",
          "Current PCIe link width (idle GPUs may lower it to save power).", (), "slow",
          vendor_notes=(("amd", "amdsmi pcie_width / max_pcie_width"),)),
    MetricSpec("gpu.pcie.link.max_width", G, "{lane}",
          "Widest PCIe link the GPU and its slot allow together.", (), "slow",
          vendor_notes=(("amd", "amdsmi pcie_width / max_pcie_width"),)),
    MetricSpec("gpu.nvlink.link.state", G, "{state}",
          "NVLink link state as NVML reports it: 0 inactive, 1 active, 2 sleep (power saving), "
          "3 active with traffic disabled; only the links the GPU has.", ("gpu.nvlink.link",),
          "slow", vendors=NVIDIA_ONLY),
    MetricSpec("gpu.nvlink.errors", C, "{error}",
          "NVLink data-link errors over all links since the driver was loaded: `crc_flit` "
          "(flow-control CRC), `replay`, `recovery`.", ("error.type",), "slow",
          vendors=NVIDIA_ONLY),
    MetricSpec("gpu.nvlink.link.errors", C, "{error}",
          "NVLink data-link errors of one link since the driver was loaded: `crc_flit` "
          "(flow-control CRC), `replay`, `recovery` (their sum over links is "
          "gpu.nvlink.errors). A link whose recovery count climbs ahead of an XID 149 shows "
          "here by its number.", ("gpu.nvlink.link", "error.type"), "slow",
          vendors=NVIDIA_ONLY,
          vendor_notes=(("nvidia", "NVML_FI_DEV_NVLINK_ERROR_DL_CRC / _REPLAY / _RECOVERY with "
                                   "the link in scopeId; Blackwell and newer serve neither "
                                   "(nvml.h: \"unsupported for Blackwell+\"): `recovery` is "
                                   "then NVML_FI_DEV_NVLINK_COUNT_LINK_RECOVERY_EVENTS"),)),
    MetricSpec("gpu.nvlink.link.speed", G, "By/s",
          "Signalling speed of one NVLink link, per direction (0 while the link is down).",
          ("gpu.nvlink.link",), "slow", vendors=NVIDIA_ONLY,
          vendor_notes=(("nvidia", "NVML_FI_DEV_NVLINK_GET_SPEED (MBps) x 10^6: 26.562 GB/s "
                                   "on H100 (NVLink 4), 53.125 GB/s on B200/GB200 (NVLink 5)"),)),
    MetricSpec("gpu.fabric.status", U, "1",
          "1 for the state of the GPU's registration with the NVLink fabric (GB200/GB300 NVL72, "
          "NVSwitch systems with Fabric Manager), 0 for the others: `not_started`, "
          "`in_progress`, `completed`, `failed` (completed with an error status), "
          "`not_supported`. A completed one names the fabric clique and cluster the GPU "
          "joined. Absent on a GPU outside a fabric.",
          ("gpu.fabric.state", "gpu.fabric.clique.id", "gpu.fabric.cluster.uuid"), "slow",
          vendors=NVIDIA_ONLY,
          vendor_notes=(("nvidia", "nvmlDeviceGetGpuFabricInfoV state and status (DCGM's "
                                   "DCGM_FI_DEV_FABRIC_MANAGER_STATUS), cliqueId, clusterUuid "
                                   "(an all-zero UUID is left out)"),)),
    MetricSpec("gpu.fabric.fault", U, "1",
          "1 while the fabric reports the fault for the GPU, 0 while it does not: "
          "`route_unhealthy`, `degraded_bandwidth`, `route_recovery`, "
          "`access_timeout_recovery`, `incorrect_configuration`. Only the faults the driver "
          "reports on.", ("gpu.fabric.fault.type",), "slow", vendors=NVIDIA_ONLY,
          vendor_notes=(("nvidia", "the fields of nvmlGpuFabricInfo healthMask "
                                   "(NVML_GPU_FABRIC_HEALTH_MASK_*), DCGM_FI_DEV_FABRIC_HEALTH_"
                                   "MASK decoded as DCGM's NVLink health watch does"),)),
    MetricSpec("gpu.fabric.health", U, "1",
          "1 for the fabric's health summary of the GPU, 0 for the others: `healthy`, "
          "`unhealthy`, `limited_capacity`. Absent where the driver gives no summary.",
          ("gpu.fabric.health.summary",), "slow", vendors=NVIDIA_ONLY,
          vendor_notes=(("nvidia", "nvmlGpuFabricInfo_v3_t healthSummary (DCGM_FI_DEV_FABRIC_"
                                   "HEALTH_SUMMARY)"),)),
    MetricSpec("gpu.clock.limit", G, "Hz",
          "Highest clock of the domain: what the GPU runs work at when nothing holds it back.",
          ("gpu.clock.domain",), "slow", vendors=NVIDIA_ONLY,
          vendor_notes=(("nvidia", "nvmlDeviceGetMaxClockInfo (dcgm's DCGM_FI_DEV_MAX_SM_CLOCK);"
                                   " replaces gpu.clock.application, read from the application "
                                   "clock target nvml.h 13 deprecates (\"do not use\")"),)),
    MetricSpec("hw.temperature.limit", G, "Cel",
          "Temperature threshold: `high.degraded` is where the GPU begins HW slowdown.",
          ("hw.limit_type",), "slow", vendors=NVIDIA_ONLY),
    MetricSpec("hw.errors", C, "{error}", "ECC errors since the driver was loaded.",
          ("error.type",), "slow",
          vendor_notes=(("amd", "`uncorrected` includes deferred errors (uncorrectable, "
                                "poisoned and deferred to the consumer)"),
                        ("nvidia", "a MIG device: its non-DRAM (SRAM) uncorrected errors only, "
                                   "the one count NVML keeps per instance; a MIG-enabled GPU "
                                   "reports none (docs/mig.md)"))),
    MetricSpec("gpu.memory.row_remap.count", U, "{row}",
          "Memory rows remapped, by the error that caused the remap. Not a monotonic count: "
          "nvml.h counts remaps that became inactive apart (nvmlRemappedRowsInfo_v2_t, "
          "NVML_FI_DEV_REMAPPED_ROWS_*_INACTIVE), so this figure can go down.",
          ("error.type",), "slow", vendors=NVIDIA_ONLY),
    MetricSpec("gpu.memory.row_remap.failure", U, "1", "1 if a row remap failed, else 0.", (),
          "slow",
          vendors=NVIDIA_ONLY),
    MetricSpec("gpu.memory.page_retirement.count", U, "{page}", "Retired frame buffer pages.",
          ("gpu.retirement.cause",), "slow", vendors=NVIDIA_ONLY),
    MetricSpec("gpu.sm.utilization", G, "1", "Fraction of SMs busy (GPM).", (), "gpm",
          vendors=NVIDIA_ONLY),
    MetricSpec("gpu.sm.occupancy", G, "1", "Warps resident per SM over the maximum (GPM).", (),
          "gpm", vendors=NVIDIA_ONLY),
    MetricSpec("gpu.tensor.utilization", G, "1", "Tensor core activity (GPM).", (), "gpm",
          vendors=NVIDIA_ONLY),
    MetricSpec("gpu.dram.utilization", G, "1", "DRAM bandwidth used over peak (GPM).", (), "gpm",
          vendors=NVIDIA_ONLY),
    MetricSpec("gpu.xgmi.io", C, "By", "AMD XGMI (Infinity Fabric) traffic over all links.",
          ("network.io.direction",), "slow", vendors=AMD_ONLY,
          vendor_notes=(("amd", "receive = data read, transmit = data written"),)),
    MetricSpec("hw.status", U, "1", "1 for the device's current state.", ("hw.state",), ""),
    MetricSpec("gpu.health.status", U, "1",
          "1 for each subsystem's current state (`ok`/`degraded`/`failed`), 0 for the "
          "others: which part of the GPU `hw.status` is about. A subsystem's state is the "
          "worst of its conditions (gray failures, XIDs by what they concern, lost/hung as "
          "`driver`).", ("gpu.health.subsystem", "hw.state"), "events"),
    MetricSpec("gpu.xid.errors", C, "{error}", "XID errors reported by the GPU since the agent "
          "started (each occurrence, storms included).", ("gpu.xid.code",), "events",
          vendors=NVIDIA_ONLY),
    MetricSpec("gpu.xid.last_seen", G, "s",
          "When the GPU last reported the XID (seconds since the Unix epoch, the fault's "
          "time), since the agent started. Alert on a first occurrence with it: increase() "
          "over gpu.xid.errors misses a series' first sample, while `time() - "
          "gpu_xid_last_seen_seconds < 300` sees it at once.", ("gpu.xid.code",), "events",
          vendors=NVIDIA_ONLY),
    MetricSpec("gpu.memory.page_retirement.pending", U, "1",
          "1 while retired pages wait for a GPU reset to take effect.", (), "slow",
          vendors=NVIDIA_ONLY),
    MetricSpec("gpu.memory.row_remap.pending", U, "1",
          "1 while remapped rows wait for a GPU reset to take effect (Ampere and newer; "
          "older GPUs retire pages instead).", (), "slow", vendors=NVIDIA_ONLY),
)

# Self-telemetry: how the agent itself is doing (exported over OTLP and Prometheus alike).
AGENT_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("gpu_agent.cycles.completed", C, "{cycle}", "Metric-group reads completed.",
               ("hw.id", "gpu.index")),
    MetricSpec("gpu_agent.cycles.missed", C, "{cycle}",
               "Sampling cycles skipped because the device was slow or hung.",
               ("hw.id", "gpu.index")),
    MetricSpec("gpu_agent.cycle.latency", G, "s",
               "Duration of the latest read of the group: the device library calls of one "
               "cycle, including the wait for the device thread.",
               ("hw.id", "gpu.index", "gpu_agent.group")),
    MetricSpec("gpu_agent.cycle.time", C, "s",
               "Total time spent reading the device (divide by gpu_agent.cycles.completed for the "
               "mean).",
               ("hw.id", "gpu.index")),
    MetricSpec("gpu_agent.call.overruns", C, "{call}",
               "Device calls that exceeded call_timeout (the device was marked unresponsive).",
               ("hw.id", "gpu.index")),
    MetricSpec("gpu_agent.library.calls", C, "{call}",
               "GPU library (NVML) calls made, per function, over all GPUs of the node.",
               ("gpu_agent.call",)),
    MetricSpec("gpu_agent.library.call.time", C, "s",
               "Time spent in GPU library calls, per function (divide by "
               "gpu_agent.library.calls for the mean latency).", ("gpu_agent.call",)),
    MetricSpec("gpu_agent.library.errors", C, "{error}",
               "GPU library (NVML) calls that returned an error, per function and return code "
               "(error.type, e.g. NVML_ERROR_UNKNOWN), over all GPUs of the node. A per-field "
               "error of nvmlDeviceGetFieldValues is counted as nvmlDeviceGetFieldValues/<field "
               "id>. Includes capability answers met while probing (NVML_ERROR_NOT_SUPPORTED).",
               ("gpu_agent.call", "error.type")),
    MetricSpec("gpu_agent.read.errors", C, "{error}", "Group reads that failed.",
               ("hw.id", "gpu.index")),
    MetricSpec("gpu_agent.exports.completed", C, "{export}",
               "Metric exports that ended (OTLP push)."),
    MetricSpec("gpu_agent.check", U, "1", "1, sent once by each test export of `gpu-agent "
               "check` (a running agent never sends it); filter it out or use it to see that "
               "checks reach the collector."),
    MetricSpec("gpu_agent.exports.failed", C, "{export}", "Metric exports that failed."),
    MetricSpec("gpu_agent.exports.skipped", C, "{export}",
               "Export intervals skipped while the previous export was still retrying."),
    MetricSpec("gpu_agent.scrapes", C, "{scrape}", "Prometheus scrapes served."),
    MetricSpec("gpu_agent.events.produced", C, "{event}",
               "Health events produced (after de-duplication and storm control)."),
    MetricSpec("gpu_agent.events.sent", C, "{event}", "Health events the collector accepted."),
    MetricSpec("gpu_agent.events.suppressed", C, "{event}",
               "Repeats folded into storm summaries (their count is in gpu.event.count)."),
    MetricSpec("gpu_agent.events.duplicates", C, "{event}",
               "XIDs seen by both NVML and the kernel log, reported once."),
    MetricSpec("gpu_agent.events.dropped", C, "{event}",
               "Health events lost: the collector was away and the spool full or unusable."),
    MetricSpec("gpu_agent.events.spooled", C, "{event}",
               "Health events written (fsynced) to the on-disk spool: every event, before its "
               "first send."),
    MetricSpec("gpu_agent.events.spool.size", U, "By", "Size of the event spool on disk."),
    MetricSpec("gpu_agent.events.spool.pending", U, "{event}",
               "Health events waiting in the spool (not yet accepted by the collector)."),
    MetricSpec("gpu_agent.events.spool.errors", C, "{error}",
               "Event spool failures: directory unusable (read-only, too open, locked), "
               "failed writes (disk full), corrupt records skipped. Events are still sent "
               "live while the collector is up."),
    MetricSpec("gpu_agent.events.quarantined", C, "{event}",
               "Health events the collector refused for good (error.type: its answer, e.g. "
               "INVALID_ARGUMENT or HTTP 400, or the exception their encoding raised), moved "
               "to the spool's dead-letter.jsonl so later events go on.", ("error.type",)),
    MetricSpec("gpu_agent.exports.throttled", C, "{response}",
               "Collector answers that asked the agent to wait (gRPC RetryInfo, HTTP "
               "Retry-After; error.type: the answer). The delay holds every request to that "
               "collector, metrics and events alike.", ("error.type", "server.address")),
    MetricSpec("gpu_agent.exports.held", C, "{request}",
               "Requests not sent because the collector's requested delay ended after their "
               "deadline (they are retried later or carried by the spool).",
               ("server.address",)),
    MetricSpec("gpu_agent.exports.throttle.remaining", G, "s",
               "Seconds until the collector's requested delay ends (0: none in force).",
               ("server.address",)),
    MetricSpec("gpu_agent.readings.dropped", C, "{series}",
               "Readings left out of every export because a value or an integer attribute is "
               "outside what OTLP carries (a signed 64-bit integer), e.g. a counter served at "
               "2^64-1: counted once per series (metric and attributes) and logged once; the "
               "other readings of the device and the other devices export as usual."),
    MetricSpec("gpu_agent.thread.restarts", C, "{restart}",
               "Long-lived agent threads restarted after an unexpected exception (logged with "
               "its cause), per thread.", ("thread.name",)),
    MetricSpec("gpu_agent.ebpf.library.count", U, "{library}",
               "CUDA library files with uprobes attached (eBPF plugin)."),
    MetricSpec("gpu_agent.ebpf.process.count", U, "{process}",
               "GPU processes whose CUDA calls are traced (eBPF plugin)."),
    MetricSpec("gpu_agent.ebpf.events.lost", C, "{event}",
               "Process exec/exit events the BPF ring buffer had no room for."),
    MetricSpec("gpu_agent.ebpf.allocations.untracked", C, "{allocation}",
               "CUDA allocations not tracked because the allocation table was full "
               "(`ebpf.max_allocations`)."),
    MetricSpec("gpu_agent.ebpf.calls.unpaired", C, "{call}",
               "Allocation or synchronisation calls whose return could not be paired with "
               "their entry (too many in flight)."),
)

_WORKLOAD = ("container.id", "k8s.namespace.name", "k8s.pod.name", "k8s.pod.uid",
             "k8s.container.name", "slurm.job.id", "k8s.resourceclaim.name",
             "k8s.resourceclaim.namespace")
_PROCESS = ("process.pid", "process.executable.name", *_WORKLOAD)

# Per process and per container on each GPU (group "processes"); workload attributes only where
# known, and a series disappears with its process or container.
PROCESS_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("gpu.process.memory.usage", G, "By", "GPU memory used by the process.",
               _PROCESS, "processes",
               vendor_notes=(("amd", "VRAM of the process (GTT not counted)"),)),
    MetricSpec("gpu.process.utilization", G, "1",
               "Fraction of the engine's time used by the process.",
               (*_PROCESS, "hw.gpu.task"), "processes",
               vendor_notes=(("amd", "`general` (GFX) and `encoder` from the growth of the "
                                     "process's DRM engine-time counters between two reads; "
                                     "absent at a process's first read and while the counter "
                                     "does not move (HIP work is invisible there: see "
                                     "`gpu.process.compute_unit.occupancy`)"),)),
    MetricSpec("gpu.process.compute_unit.occupancy", G, "1",
               "Fraction of the GPU's compute units running the process's waves.",
               _PROCESS, "processes", vendors=AMD_ONLY,
               vendor_notes=(("amd", "KFD's per-process `cu_occupancy` "
                                     "(amdsmi_get_gpu_process_list) over the device's compute "
                                     "units; HIP work shows here, not in "
                                     "`gpu.process.utilization`"),)),
    MetricSpec("gpu.process.series.overflow", U, "{process}",
               "Processes on the GPU beyond the per-process series limit (not exported one by "
               "one; still counted in their container's totals).", (), "processes"),
    MetricSpec("gpu.container.memory.usage", G, "By",
               "GPU memory used by the container's (or job's) processes.", _WORKLOAD,
               "processes"),
    MetricSpec("gpu.container.utilization", G, "1",
               "Fraction of the engine's time used by the container's processes.",
               (*_WORKLOAD, "hw.gpu.task"), "processes"),
    MetricSpec("gpu.container.memory.limit", G, "By",
               "GPU memory allocated to the container on this GPU, where known.", _WORKLOAD,
               "processes"),
)

_LAUNCH = "gpu.cuda.launch.type"

# Per process and per container across the node's GPUs, from uprobes on the CUDA runtime and
# driver libraries (gpu_otel_agent/plugins/ebpf; off unless `ebpf.enabled`). A uprobe sees the
# call, not the device it targets, so these carry no device attributes.
CUDA_METRICS: tuple[MetricSpec, ...] = (
    MetricSpec("gpu.process.cuda.kernel_launches", C, "{launch}",
               "CUDA kernel launch calls (`kernel`) and CUDA graph launch calls (`graph`) the "
               "process made.", (*_PROCESS, _LAUNCH), "ebpf", vendors=NVIDIA_ONLY),
    MetricSpec("gpu.process.cuda.memory.allocated", G, "By",
               "GPU memory the process holds from cudaMalloc/cuMemAlloc calls (and their "
               "Managed/Async forms) not yet freed.", _PROCESS, "ebpf", vendors=NVIDIA_ONLY),
    MetricSpec("gpu.process.cuda.memory.peak", G, "By",
               "The most `gpu.process.cuda.memory.allocated` has been.", _PROCESS, "ebpf",
               vendors=NVIDIA_ONLY),
    MetricSpec("gpu.process.cuda.sync.time", C, "s",
               "Time the process's threads spent waiting in stream, device and event "
               "synchronisation.", _PROCESS, "ebpf", vendors=NVIDIA_ONLY),
    MetricSpec("gpu.process.cuda.series.overflow", U, "{process}",
               "Traced processes beyond `ebpf.max_process_series` (the least active by "
               "launches): not exported one by one, still counted in their container's "
               "totals.", (), "ebpf", vendors=NVIDIA_ONLY),
    MetricSpec("gpu.container.cuda.kernel_launches", C, "{launch}",
               "Kernel and graph launch calls of the container's processes, those that have "
               "exited included.", (*_WORKLOAD, _LAUNCH), "ebpf", vendors=NVIDIA_ONLY),
    MetricSpec("gpu.container.cuda.memory.allocated", G, "By",
               "GPU memory the container's processes hold from traced allocations.", _WORKLOAD,
               "ebpf", vendors=NVIDIA_ONLY),
    MetricSpec("gpu.container.cuda.sync.time", C, "s",
               "Synchronisation time of the container's processes, those that have exited "
               "included.", _WORKLOAD, "ebpf", vendors=NVIDIA_ONLY),
)

_BY_NAME = {spec.name: spec
            for spec in (*DEVICE_METRICS, *PROCESS_METRICS, *CUDA_METRICS, *AGENT_METRICS)}


def spec_for(name: str) -> MetricSpec:
    """The catalog entry for ``name``; a reading without one is a programming error."""
    return _BY_NAME[name]


DEVICE_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("hw.id", "GPU UUID"),
    ("hw.type", "`gpu`"),
    ("hw.vendor", "`NVIDIA` or `AMD`, as the vendor writes its name (the conventions' "
                  "examples: `AMD`, `Intel`)"),
    ("hw.model", "product name"),
    ("hw.driver_version", "the driver the GPU runs under (NVIDIA: nvmlSystemGetDriverVersion; "
                          "AMD: amdgpu's), where known"),
    ("hw.serial_number", "the board's serial number, where the driver reports one (NVIDIA: "
                         "nvmlDeviceGetSerial; AMD: board product_serial)"),
    ("hw.firmware_version", "NVIDIA: the VBIOS version (nvmlDeviceGetVbiosVersion)"),
    ("gpu.index", "index on the node"),
    ("gpu.pci.bus_id", "PCI bus id"),
)

# A partition of a GPU (a MIG instance, an AMD compute partition) is a device of its own; its
# points add these.
PARTITION_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("hw.parent", "the UUID of the physical GPU the partition is part of"),
    ("gpu.mig.profile", "NVIDIA MIG: the GPU instance profile (`3g.40gb`)"),
    ("gpu.mig.gpu_instance.id", "NVIDIA MIG: the GPU instance id"),
    ("gpu.mig.compute_instance.id", "NVIDIA MIG: the compute instance id"),
    ("gpu.mig.compute_instance.profile",
     "NVIDIA MIG: the compute instance's own profile (`1c.3g.40gb`), where it is smaller than "
     "its GPU instance"),
    ("amd.partition.id", "AMD compute partition: the XCP index (amdsmi `current_partition_id`)"),
    ("amd.partition.compute_mode", "AMD compute partition mode of its GPU (`DPX`, `QPX`, `CPX`)"),
    ("amd.partition.memory_mode", "AMD memory partition mode of its GPU (`NPS1`, `NPS4`)"),
)

# A device (GPU or MIG instance) a pod holds through a Kubernetes DRA ResourceClaim: the DRA
# device it is, as the kubelet names it; on all of the device's points while a listed claim
# holds it (three labels more on a device's series, none on a device no claim holds).
DRA_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("gpu.dra.driver", "Kubernetes DRA: the driver of the claimed device (`gpu.nvidia.com`)"),
    ("gpu.dra.pool", "Kubernetes DRA: the device's pool (NVIDIA's driver: the node name)"),
    ("gpu.dra.device", "Kubernetes DRA: the device's name in its pool (`gpu-0`, "
                       "`gpu-0-mig-1g10gb-19-0`)"),
)

WORKLOAD_ATTRIBUTES: tuple[tuple[str, str], ...] = (
    ("process.pid", "process id (host PID namespace)"),
    ("process.executable.name", "process name, sanitised and length-limited"),
    ("process.command_line", "only with `attribution.export_command_line: true`"),
    ("container.id", "runtime container id from the cgroup path"),
    ("k8s.namespace.name", "from the kubelet pod-resources API"),
    ("k8s.pod.name", "from the kubelet pod-resources API"),
    ("k8s.pod.uid", "from the cgroup path"),
    ("k8s.container.name", "from the kubelet pod-resources API"),
    ("slurm.job.id", "from the Slurm job cgroup"),
    ("k8s.resourceclaim.name", "the DRA ResourceClaim the container holds this GPU through "
                               "(kubelet pod-resources `dynamic_resources`)"),
    ("k8s.resourceclaim.namespace", "the claim's namespace, only where it differs from the "
                                    "pod's"),
)
