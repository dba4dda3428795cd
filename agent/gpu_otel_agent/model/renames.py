"""Every name or meaning changed when the agent moved to the semantic conventions as published
(v1.44.0) and to ``naming.md`` for its own names: the one table ``docs/migration.md`` is
generated from (``gpu-agent docs migration``), and the one a test checks the shipped
dashboards, rules and collector configs against (no old Prometheus name may remain in them).

The project is 0.x: these changed once, together, in the release that carries this table.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Rename:
    """A metric that moved to another OpenTelemetry name, instrument or unit (and so, in the
    default Prometheus scheme, to another series name)."""

    old: str  # the OpenTelemetry name before
    old_prometheus: str  # its series name before (default scheme)
    new: str  # the OpenTelemetry name now
    why: str
    promql: str = ""  # how a query changes beyond the name, where it does


@dataclass(frozen=True)
class Change:
    """A name that stayed while what it carries changed (a meaning, a value, a place)."""

    what: str
    before: str
    after: str
    promql: str


RENAMES: tuple[Rename, ...] = (
    Rename("hw.gpu.memory.utilization", "hw_gpu_memory_utilization_ratio",
           "gpu.memory.controller.utilization",
           "The conventions' hw.gpu.memory.utilization is the fraction of memory used; the "
           "memory controller's busy time keeps a name of its own.",
           "hw_gpu_memory_utilization_ratio now exists with the conventions' meaning "
           "(usage / limit): a panel about memory filled keeps the old name, one about the "
           "memory controller takes the new one."),
    Rename("gpu.fan.speed", "gpu_fan_speed_ratio", "hw.fan.speed_ratio",
           "The conventions' fan metric; the fan is a component of its own "
           "(hw.id=<GPU id>/fan0, hw.parent=<GPU id>).",
           "select the GPU by hw_parent (or gpu_index) instead of hw_id."),
    Rename("gpu.pcie.link.generation.max", "gpu_pcie_link_generation_max_ratio",
           "gpu.pcie.link.max_generation",
           "A metric name may not be another metric's namespace (naming.md)."),
    Rename("gpu.pcie.link.width.max", "gpu_pcie_link_width_max", "gpu.pcie.link.max_width",
           "A metric name may not be another metric's namespace (naming.md)."),
    Rename("gpu.pcie.link.generation", "gpu_pcie_link_generation_ratio",
           "gpu.pcie.link.generation",
           "Unit {generation}, not 1: a generation is not a ratio (Prometheus added _ratio)."),
    Rename("gpu.memory.retired_pages.pending", "gpu_memory_retired_pages_pending_ratio",
           "gpu.memory.page_retirement.pending",
           "Namespace clash with gpu.memory.retired_pages; a boolean is an UpDownCounter of "
           "unit 1 (as hw.status), not a gauge Prometheus calls a ratio."),
    Rename("gpu.memory.retired_pages", "gpu_memory_retired_pages",
           "gpu.memory.page_retirement.count",
           "UpDownCounter names are not plural (naming.md); one namespace with "
           "gpu.memory.page_retirement.pending."),
    Rename("gpu.memory.remapped_rows", "gpu_memory_remapped_rows_total",
           "gpu.memory.row_remap.count",
           "Not monotonic (nvml.h counts remaps that became inactive apart): an UpDownCounter, "
           "and UpDownCounter names are not plural (naming.md); one namespace with "
           "gpu.memory.row_remap.failure and .pending.",
           "gpu_memory_remapped_rows_total -> gpu_memory_row_remap_count; no increase() or "
           "rate() on it (it can go down): compare values."),
    Rename("gpu.memory.row_remap.failure", "gpu_memory_row_remap_failure_ratio",
           "gpu.memory.row_remap.failure",
           "A boolean is an UpDownCounter of unit 1 (as hw.status), not a gauge Prometheus "
           "calls a ratio."),
    Rename("gpu.memory.row_remap.pending", "gpu_memory_row_remap_pending_ratio",
           "gpu.memory.row_remap.pending",
           "A boolean is an UpDownCounter of unit 1 (as hw.status)."),
    Rename("gpu.clock.throttle", "gpu_clock_throttle_ratio", "gpu.clock.throttle",
           "A boolean per reason is an UpDownCounter of unit 1 (as hw.status)."),
    Rename("gpu.performance_state", "gpu_performance_state_ratio", "gpu.performance_state",
           "Unit {pstate}, not 1: a P-state number is not a ratio."),
    Rename("gpu.nvlink.link.state", "gpu_nvlink_link_state_ratio", "gpu.nvlink.link.state",
           "Unit {state}, not 1: a state code is not a ratio."),
    Rename("gpu_agent.cycles", "gpu_agent_cycles_total", "gpu_agent.cycles.completed",
           "A metric name may not be another metric's namespace (gpu_agent.cycles.missed)."),
    Rename("gpu_agent.cycle.duration", "gpu_agent_cycle_duration_seconds",
           "gpu_agent.cycle.latency",
           "`.duration` names a histogram in naming.md; this is the latest read's time."),
    Rename("gpu_agent.exports", "gpu_agent_exports_total", "gpu_agent.exports.completed",
           "A metric name may not be another metric's namespace (gpu_agent.exports.skipped)."),
    Rename("gpu_agent.export.failures", "gpu_agent_export_failures_total",
           "gpu_agent.exports.failed", "One namespace for the export counters."),
    Rename("gpu_agent.events", "gpu_agent_events_total", "gpu_agent.events.produced",
           "A metric name may not be another metric's namespace (gpu_agent.events.sent)."),
    Rename("gpu_agent.events.spool.records", "gpu_agent_events_spool_records",
           "gpu_agent.events.spool.pending",
           "UpDownCounter names are not plural (naming.md)."),
    Rename("gpu_agent.ebpf.libraries", "gpu_agent_ebpf_libraries",
           "gpu_agent.ebpf.library.count", "UpDownCounter names are not plural (naming.md)."),
    Rename("gpu_agent.ebpf.processes", "gpu_agent_ebpf_processes",
           "gpu_agent.ebpf.process.count", "UpDownCounter names are not plural (naming.md)."),
    Rename("gpu_agent.check", "gpu_agent_check_ratio", "gpu_agent.check",
           "A constant 1 is an UpDownCounter of unit 1, not a ratio."),
    Rename("hw.gpu.utilization{hw.gpu.task=decoder} (AMD)", "hw_gpu_utilization_ratio",
           "gpu.multimedia.utilization",
           "AMD's multimedia engine (VCN, `mm_activity`) is not a decoder: its own name, AMD "
           "only.",
           'hw_gpu_utilization_ratio{hw_gpu_task="decoder",hw_vendor="amd"} -> '
           "gpu_multimedia_utilization_ratio"),
)

CHANGES: tuple[Change, ...] = (
    Change("hw.gpu.memory.utilization", "memory controller busy time",
           "fraction of memory used (hw.gpu.memory.usage / hw.gpu.memory.limit)",
           "none for a memory-filled panel; gpu_memory_controller_utilization_ratio for the "
           "old quantity"),
    Change("hw.gpu.memory.usage", "absent on drivers without nvmlDeviceGetMemoryInfo_v2",
           "v1's used there (reserve included)", "none"),
    Change("hw.vendor", "`nvidia`, `amd`", "`NVIDIA`, `AMD` (as the vendors write them; the "
           "conventions' examples)", 'hw_vendor="nvidia" -> hw_vendor="NVIDIA"'),
    Change("hw.errors{error.type} (AMD)", "`deferred` beside `uncorrected`",
           "deferred errors counted in `uncorrected` (the conventions' two values for a GPU)",
           'drop error_type="deferred"'),
    Change("labels of hw.* series", "every device attribute on every hw.* point",
           "only the conventional attributes the conventions list for the metric: no `hw_type` "
           "on `hw_gpu_*`; no `hw_vendor`, `hw_model`, `hw_driver_version`, `hw_serial_number`, "
           "`hw_firmware_version` on `hw_power`, `hw_energy`; neither on `hw_temperature*`",
           "select those by hw_id (or gpu_index), not by hw_vendor/hw_model/hw_type"),
    Change("gpu.driver.version (resource)", "one resource attribute, comma-joined on a mixed "
           "node", "`hw.driver_version` on each device's points, with `hw.serial_number` and "
           "`hw.firmware_version` where known",
           "target_info{gpu_driver_version=...} -> hw_driver_version label on the series; "
           "dcgm scheme: DCGM_FI_DRIVER_VERSION is the device's own driver"),
    Change("host.name (resource)", "the agent container's hostname (the pod's name)",
           "the node's name (Kubernetes: spec.nodeName); else the host's name",
           'target_info{host_name="<pod>"} -> target_info{host_name="<node>"}'),
    Change("service.instance.id (resource)", "a new random UUID at every start",
           "UUIDv5 of the node's name: the same across restarts", "none"),
    Change("health events: process.pid, process.executable.name, k8s.pod.name, "
           "k8s.namespace.name, k8s.container.name, container.id, …",
           "arrays on one record, each attribute de-duplicated on its own",
           "one record per process on the GPU, each with scalar attributes of its own "
           "workload; the records of one event share gpu.event.id",
           'Loki: {service_name="gpu-otel-agent"} | k8s_pod_name="x" matches; count events '
           "by distinct gpu_event_id"),
)
