"""The validated, immutable agent configuration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

EXPORTERS = ("otlp", "console")
OTLP_PROTOCOLS = ("grpc", "http/protobuf")
LOG_LEVELS = ("debug", "info", "warning", "error")
PROMETHEUS_SCHEMES = ("otel", "dcgm")
PROCESS_EVENT_SOURCES = ("netlink", "ebpf")


@dataclass(frozen=True)
class GroupConfig:
    """One metric group: read together, on its own interval, switchable at run time."""

    enabled: bool
    interval: float  # seconds


@dataclass(frozen=True)
class OtlpConfig:
    """Fallbacks for the standard OTEL_EXPORTER_OTLP_* variables, which win when set."""

    protocol: str | None = None
    endpoint: str | None = None
    headers: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    insecure: bool | None = None
    compression: str | None = None
    timeout: float | None = None  # seconds
    certificate: str | None = None


@dataclass(frozen=True)
class HealthConfig:
    """Health events; changes take effect at the next restart."""

    enabled: bool = True
    kmsg: bool = True
    storm_window: float = 10.0  # seconds
    dedup_window: float = 2.0  # seconds
    spool_path: str | None = "/var/lib/gpu-otel-agent/events"
    spool_max_mib: float = 16.0


@dataclass(frozen=True)
class PrometheusConfig:
    """The pull endpoint (/metrics, /healthz, /readyz); off unless enabled."""

    enabled: bool = False
    listen: str = "0.0.0.0:9400"  # host:port; dcgm-exporter's port, so scrape configs carry over
    scheme: str = "otel"  # "otel": OTel->Prometheus translation; "dcgm": dcgm-exporter names
    web_config_file: str | None = None  # exporter-toolkit format: TLS and basic auth
    stall_after: float | None = None  # seconds without a sample before /healthz fails


@dataclass(frozen=True)
class TracingConfig:
    """Spans of the agent's own pipeline (exports, scrapes) over OTLP; off unless enabled."""

    enabled: bool = False
    sample_ratio: float = 1.0


@dataclass(frozen=True)
class KubeletConfig:
    socket: str | None = "/var/lib/kubelet/pod-resources/kubelet.sock"  # None: no pod names
    refresh_interval: float = 30.0  # seconds between pod-resources List calls (besides events)
    timeout: float = 5.0  # seconds per call


@dataclass(frozen=True)
class AttributionConfig:
    """Who uses each GPU: processes, containers, pods, Slurm jobs."""

    enabled: bool = True
    max_process_series: int = 256  # per GPU
    export_command_line: bool = False
    reconcile_interval: float = 60.0  # seconds
    proc_root: str = "/proc"
    cgroup_root: str = "/sys/fs/cgroup"
    # device-plugin resource name -> bytes per allocated unit (fractional GPU memory)
    memory_resources: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))
    kubelet: KubeletConfig = KubeletConfig()
    process_events: str = "netlink"  # or "ebpf": exec/exit from the eBPF plugin's tracepoints


@dataclass(frozen=True)
class EbpfConfig:
    """Per-process CUDA activity from uprobes (plugins/ebpf); off unless enabled."""

    enabled: bool = False
    object_path: str | None = None  # None: the object built into the package
    interval: float = 1.0  # seconds between reads of the counters (and library scans)
    max_allocations: int = 65536  # live CUDA allocations tracked, over all processes
    max_process_series: int = 1024  # per node; the rest is counted, never merged
    workload_retention: float = 300.0  # seconds a container's totals outlive its last process


@dataclass(frozen=True)
class AgentConfig:
    exporter: str
    export_interval: float  # seconds
    call_timeout: float  # seconds a device call may take before the device is unresponsive
    lost_reprobe_interval: float  # seconds between probes of a lost device
    shutdown_timeout: float  # seconds for the final export on SIGTERM
    log_level: str
    node_name: str | None
    groups: Mapping[str, GroupConfig]
    otlp: OtlpConfig
    prometheus: PrometheusConfig = field(default_factory=PrometheusConfig)
    tracing: TracingConfig = field(default_factory=TracingConfig)
    attribution: AttributionConfig = AttributionConfig()
    health: HealthConfig = HealthConfig()
    ebpf: EbpfConfig = EbpfConfig()
