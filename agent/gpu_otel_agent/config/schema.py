"""The validated, immutable agent configuration.

The classes give the shape the code reads (``config.groups["fast"].interval``); every default
comes from the table (``table.py``), so ``AgentConfig()`` is the configuration without file,
environment or flags. ``load.py`` fills the fields from the table's rows by their dotted names.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from gpu_otel_agent.config.table import GROUPS
from gpu_otel_agent.config.table import default as _d


@dataclass(frozen=True)
class GroupConfig:
    """One metric group: read together, on its own interval, switchable at run time."""

    enabled: bool
    interval: float  # seconds


def _groups() -> Mapping[str, GroupConfig]:
    return MappingProxyType({
        name: GroupConfig(_d(f"groups.{name}.enabled"), _d(f"groups.{name}.interval"))
        for name in GROUPS
    })


@dataclass(frozen=True)
class OtlpConfig:
    """Fallbacks for the standard OTEL_EXPORTER_OTLP_* variables, which win when set."""

    protocol: str | None = _d("otlp.protocol")
    endpoint: str | None = _d("otlp.endpoint")
    headers: Mapping[str, str] = field(default_factory=lambda: _d("otlp.headers"))
    insecure: bool | None = _d("otlp.insecure")
    compression: str | None = _d("otlp.compression")
    timeout: float | None = _d("otlp.timeout")  # seconds
    certificate: str | None = _d("otlp.certificate")


@dataclass(frozen=True)
class HealthConfig:
    """Health events; changes take effect at the next restart."""

    enabled: bool = _d("health.enabled")
    kmsg: bool = _d("health.kmsg")
    storm_window: float = _d("health.storm_window")  # seconds
    dedup_window: float = _d("health.dedup_window")  # seconds
    spool_path: str | None = _d("health.spool_path")
    spool_max_mib: float = _d("health.spool_max_mib")
    degrade_after: int = _d("health.degrade_after")  # slow reads
    clear_after: int = _d("health.clear_after")  # slow reads


@dataclass(frozen=True)
class PrometheusConfig:
    """The pull endpoint (/metrics, /healthz, /readyz); off unless enabled."""

    enabled: bool = _d("prometheus.enabled")
    listen: str = _d("prometheus.listen")  # host:port
    scheme: str = _d("prometheus.scheme")  # "otel", "dcgm" or "dcgm-4.9" (dcgm-exporter names)
    dcgm_exporter_version: str = _d("prometheus.dcgm_exporter_version")  # its labels
    web_config_file: str | None = _d("prometheus.web_config_file")  # exporter-toolkit format
    stall_after: float | None = _d("prometheus.stall_after")  # seconds


@dataclass(frozen=True)
class LocalEndpointConfig:
    """The local read-only Unix socket of ``gpu-agent top`` (``gpu_otel_agent/local``)."""

    enabled: bool = _d("local_endpoint.enabled")
    socket: str = _d("local_endpoint.socket")
    group: str | None = _d("local_endpoint.group")  # None: the agent's own group
    recent_events: int = _d("local_endpoint.recent_events")


@dataclass(frozen=True)
class TracingConfig:
    """Spans of the agent's own pipeline (exports, scrapes) over OTLP; off unless enabled."""

    enabled: bool = _d("tracing.enabled")
    sample_ratio: float = _d("tracing.sample_ratio")


@dataclass(frozen=True)
class KubeletConfig:
    socket: str | None = _d("attribution.kubelet.socket")  # None: no pod names
    refresh_interval: float = _d("attribution.kubelet.refresh_interval")  # seconds
    timeout: float = _d("attribution.kubelet.timeout")  # seconds per call
    dra_host_root: str = _d("attribution.kubelet.dra_host_root")  # CDI specs, /proc/driver


@dataclass(frozen=True)
class AttributionConfig:
    """Who uses each GPU: processes, containers, pods, Slurm jobs."""

    enabled: bool = _d("attribution.enabled")
    max_process_series: int = _d("attribution.max_process_series")  # per GPU
    export_command_line: bool = _d("attribution.export_command_line")
    reconcile_interval: float = _d("attribution.reconcile_interval")  # seconds
    proc_root: str = _d("attribution.proc_root")
    cgroup_root: str = _d("attribution.cgroup_root")
    # device-plugin resource name -> bytes per allocated unit (fractional GPU memory)
    memory_resources: Mapping[str, int] = field(
        default_factory=lambda: _d("attribution.memory_resources"))
    kubelet: KubeletConfig = field(default_factory=KubeletConfig)
    process_events: str = _d("attribution.process_events")  # "netlink" or "ebpf"


@dataclass(frozen=True)
class EbpfConfig:
    """Per-process CUDA activity from uprobes (gpu_otel_agent/plugins/ebpf); off unless enabled."""

    enabled: bool = _d("ebpf.enabled")
    object_path: str | None = _d("ebpf.object_path")  # None: the object built into the package
    interval: float = _d("ebpf.interval")  # seconds
    max_allocations: int = _d("ebpf.max_allocations")
    max_process_series: int = _d("ebpf.max_process_series")  # per node
    workload_retention: float = _d("ebpf.workload_retention")  # seconds


@dataclass(frozen=True)
class AgentConfig:
    exporter: str = _d("exporter")
    export_interval: float = _d("export_interval")  # seconds
    call_timeout: float = _d("call_timeout")  # seconds before a device is unresponsive
    lost_reprobe_interval: float = _d("lost_reprobe_interval")  # seconds
    shutdown_timeout: float = _d("shutdown_timeout")  # seconds for the final export
    log_level: str = _d("log_level")
    node_name: str | None = _d("node_name")
    groups: Mapping[str, GroupConfig] = field(default_factory=_groups)
    attribution: AttributionConfig = field(default_factory=AttributionConfig)
    ebpf: EbpfConfig = field(default_factory=EbpfConfig)
    health: HealthConfig = field(default_factory=HealthConfig)
    otlp: OtlpConfig = field(default_factory=OtlpConfig)
    tracing: TracingConfig = field(default_factory=TracingConfig)
    prometheus: PrometheusConfig = field(default_factory=PrometheusConfig)
    local_endpoint: LocalEndpointConfig = field(default_factory=LocalEndpointConfig)
