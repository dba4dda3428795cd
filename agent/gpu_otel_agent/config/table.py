"""Every configuration key, once: the single source of the agent's configuration.

One row per key says its type (a :mod:`kind <gpu_otel_agent.config.kinds>`, which also
validates), default, environment variables, command-line flag, when a change takes effect and
what it means. Loading and validation (``load.py``), the dataclass defaults (``schema.py``),
``gpu-agent config show``, ``docs/config.md`` and the chart's ``values.schema.json`` are all
derived from :data:`TABLE`; nothing else lists keys.

Precedence, highest first: command-line flags, the agent's own ``GPU_AGENT_*`` variables,
generic variables other software sets too (``K8S_NODE_NAME``, ``OTEL_*``), the file, the
defaults here.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from gpu_otel_agent.config.kinds import (
    AbsolutePath,
    Choice,
    Count,
    Directory,
    Flag,
    Invalid,
    Kind,
    ListenAddress,
    Number,
    OtlpEndpoint,
    Seconds,
    SizeMap,
    StringMap,
    Text,
)

EXPORTERS = ("otlp", "console", "none")
OTLP_PROTOCOLS = ("grpc", "http/protobuf")
LOG_LEVELS = ("debug", "info", "warning", "error")
# ``dcgm``: dcgm-exporter <= 4.8's names; ``dcgm-4.9``: >= 4.9's (model/dcgm_names.py).
PROMETHEUS_SCHEMES = ("otel", "dcgm", "dcgm-4.9")
# dcgm-exporter releases (tags of NVIDIA/dcgm-exporter, DCGM-exporter version), oldest first;
# the ``dcgm`` scheme follows the one configured (export/prometheus/dcgm_scheme.py).
DCGM_EXPORTER_RELEASES = ("4.2.3-4.2.0", "4.3.1-4.4.0", "4.4.0-4.5.0", "4.4.1-4.5.2",
                          "4.4.1-4.6.0", "4.4.2-4.7.0", "4.4.2-4.7.1", "4.5.1-4.8.0",
                          "4.5.2-4.8.1", "4.5.3-4.8.2", "4.6.0-4.8.3")
PROCESS_EVENT_SOURCES = ("netlink", "ebpf")
AGENT_ENV_PREFIX = "GPU_AGENT_"
# The groups the core knows; a plugin may add others, configured by the ``groups.*`` rows.
ANY_GROUP = "*"


class Reload(enum.Enum):
    """When a changed value takes effect (runtime/agent.py reloads on SIGHUP and file change)."""

    LIVE = "live"  # read from the running configuration each time it is used
    RESTART = "restart"  # read once at start-up; a reload logs that a restart is needed


@dataclass(frozen=True)
class Env:
    """An environment variable that sets a key; ``scale`` converts its unit into the key's."""

    name: str
    scale: float = 1.0
    unit: str = ""  # shown in the docs when it is not the key's unit

    def label(self) -> str:
        return f"`{self.name}`" + (f" ({self.unit})" if self.unit else "")


@dataclass(frozen=True)
class Key:
    """One configuration key."""

    key: str  # dotted path in the YAML file
    kind: Kind
    default: Any
    reload: Reload
    description: str
    env: Env | None = None  # the agent's own variable (GPU_AGENT_*)
    generic_env: Env | None = None  # a variable other software sets too: loses to ``env``
    # Read by the OpenTelemetry exporter itself (and its per-signal variants); wins over the
    # file, so the key is only a fallback. Documented, not loaded: the exporter does that.
    exporter_env: str | None = None
    flag: str | None = None  # command-line flag of ``run`` and ``config show``

    def __post_init__(self) -> None:
        # A bad row is a bug in the agent: fail at import, not at a user's first reload.
        try:
            self.kind.check(self.default)
        except Invalid as error:
            raise ValueError(f"{self.key}: default {self.default!r}: {error}") from None
        if self.env is not None and not self.env.name.startswith(AGENT_ENV_PREFIX):
            raise ValueError(f"{self.key}: the agent's own variable must start with "
                             f"{AGENT_ENV_PREFIX}, not {self.env.name}")
        if self.generic_env is not None and self.generic_env.name.startswith(AGENT_ENV_PREFIX):
            raise ValueError(f"{self.key}: {self.generic_env.name} is the agent's own variable")
        if not self.description.strip():
            raise ValueError(f"{self.key}: no description")

    @property
    def section(self) -> str:
        return self.key.rpartition(".")[0]

    @property
    def name(self) -> str:
        return self.key.rpartition(".")[2]

    @property
    def override(self) -> str | None:
        """The attribute of :class:`~gpu_otel_agent.config.load.Overrides` the flag fills."""
        return None if self.flag is None else flag_dest(self.flag)


def flag_dest(flag: str) -> str:
    """``--export-interval`` -> ``export_interval``: argparse's dest, the Overrides field."""
    return flag.removeprefix("--").replace("-", "_")


def _group(name: str, interval: float, what: str, interval_what: str) -> tuple[Key, Key]:
    return (
        Key(f"groups.{name}.enabled", Flag(), True, Reload.LIVE, what),
        Key(f"groups.{name}.interval", Seconds(), interval, Reload.LIVE, interval_what),
    )


LIVE, RESTART = Reload.LIVE, Reload.RESTART

TABLE: tuple[Key, ...] = (
    Key("exporter", Choice(choices=EXPORTERS), "otlp", RESTART,
        "`otlp` (push to a collector), `console` (print) or `none` (sample and serve locally: "
        "Prometheus, the local endpoint; send nothing).",
        env=Env("GPU_AGENT_EXPORTER"), flag="--exporter"),
    Key("export_interval", Seconds(), 10.0, LIVE, "Seconds between exports.",
        env=Env("GPU_AGENT_EXPORT_INTERVAL"),
        generic_env=Env("OTEL_METRIC_EXPORT_INTERVAL", scale=0.001, unit="ms"),
        flag="--export-interval"),
    Key("call_timeout", Seconds(), 2.0, LIVE,
        "Seconds a device call may take before the GPU is reported unresponsive."),
    Key("lost_reprobe_interval", Seconds(), 30.0, LIVE,
        "Seconds between probes of a GPU that fell off the bus."),
    Key("shutdown_timeout", Seconds(), 3.0, LIVE,
        "Seconds the final export may take on SIGTERM."),
    Key("log_level", Choice(choices=LOG_LEVELS, fold_case=True), "info", LIVE,
        "`debug`, `info`, `warning` or `error`.",
        env=Env("GPU_AGENT_LOG_LEVEL"), flag="--log-level"),
    Key("node_name", Text(nullable=True), None, RESTART, "`k8s.node.name` of the resource.",
        env=Env("GPU_AGENT_NODE_NAME"), generic_env=Env("K8S_NODE_NAME")),
    # The fast group feeds dashboards and autoscaling; the slow group reads counters that change
    # rarely and cost more calls; GPM needs two samples, so its interval is the averaging window.
    Key("groups.fast.enabled", Flag(), True, LIVE,
        "Utilization, memory, power, temperature, energy, PCIe, SM clock."),
    Key("groups.fast.interval", Seconds(), 5.0, LIVE, "Seconds between fast-group reads.",
        env=Env("GPU_AGENT_INTERVAL"), flag="--interval"),
    *_group("slow", 30.0, "ECC, remapped rows, retired pages, violations, NVLink, encoder/"
            "decoder, fan, P-state, throttle reasons, other clocks.",
            "Seconds between slow-group reads."),
    *_group("gpm", 10.0, "SM / tensor / DRAM activity (GPM, Hopper and newer).",
            "Seconds between GPM reads (the averaging window)."),
    *_group("processes", 5.0, "Per-process and per-container GPU use (`gpu.process.*`, "
            "`gpu.container.*`).", "Seconds between process-list reads."),
    *_group(ANY_GROUP, 10.0, "A group a plugin adds (any other name under `groups`): read it.",
            "Seconds between reads of that group."),
    # Per-process / per-container attribution (gpu_otel_agent/workloads,
    # gpu_otel_agent/plugins/kubernetes).
    Key("attribution.enabled", Flag(), True, RESTART,
        "Attribute GPU use to processes, containers, pods and Slurm jobs."),
    Key("attribution.max_process_series", Count(), 256, RESTART,
        "Per GPU: processes beyond it (smallest memory first) are counted in "
        "`gpu.process.series.overflow`, not exported one by one; container totals keep them."),
    Key("attribution.export_command_line", Flag(), False, RESTART,
        "Add `process.command_line` (sanitised, 1024 characters at most). Off: command lines "
        "hold secrets."),
    Key("attribution.reconcile_interval", Seconds(), 60.0, RESTART,
        "Seconds between re-checks of the GPU processes held (events do the work; this "
        "catches what they missed)."),
    Key("attribution.proc_root", AbsolutePath(), "/proc", RESTART,
        "Where the host's /proc is mounted."),
    Key("attribution.cgroup_root", AbsolutePath(), "/sys/fs/cgroup", RESTART,
        "Where the host's cgroup hierarchies are mounted."),
    Key("attribution.memory_resources", SizeMap(), {}, RESTART,
        "Fractional GPU device plugins: resource name -> bytes per allocated unit, for "
        "`gpu.container.memory.limit`."),
    Key("attribution.kubelet.socket", AbsolutePath(nullable=True),
        "/var/lib/kubelet/pod-resources/kubelet.sock", RESTART,
        "The kubelet pod-resources socket; `null` turns pod names off.",
        env=Env("GPU_AGENT_KUBELET_SOCKET")),
    Key("attribution.kubelet.refresh_interval", Seconds(), 30.0, RESTART,
        "Seconds between `List` calls besides those a new pod or a kubelet restart triggers."),
    Key("attribution.kubelet.timeout", Seconds(), 5.0, RESTART,
        "Seconds a pod-resources call may take."),
    Key("attribution.kubelet.dra_host_root", AbsolutePath(), "/", RESTART,
        "Where the host's files that tie DRA claims to GPUs are seen: the CDI spec "
        "directories `etc/cdi` and `var/run/cdi` and the NVIDIA driver's `proc/driver` "
        "are read under it (no API server is asked)."),
    Key("attribution.process_events", Choice(choices=PROCESS_EVENT_SOURCES), "netlink", RESTART,
        "Where process exec/exit events come from: `netlink` (the kernel's process connector; "
        "needs CAP_NET_ADMIN in the host network namespace) or `ebpf` (the eBPF plugin's "
        "scheduler tracepoints; needs `ebpf.enabled`)."),
    # Per-process CUDA activity from eBPF uprobes (gpu_otel_agent/plugins/ebpf); needs CAP_BPF +
    # CAP_PERFMON.
    Key("ebpf.enabled", Flag(), False, RESTART,
        "Per-process CUDA activity from uprobes on the CUDA libraries GPU processes map "
        "(`gpu.process.cuda.*`); needs CAP_BPF, CAP_PERFMON, CAP_SYS_ADMIN, CAP_SYS_PTRACE "
        "and Linux >= 5.17 with BTF.",
        env=Env("GPU_AGENT_EBPF_ENABLED")),
    Key("ebpf.object_path", AbsolutePath(nullable=True), None, RESTART,
        "The compiled BPF object to load; `null`: the one built into the package."),
    Key("ebpf.interval", Seconds(), 1.0, RESTART,
        "Seconds between reads of the BPF counters and scans for newly mapped CUDA libraries."),
    Key("ebpf.max_allocations", Count(minimum=1), 65536, RESTART,
        "Live CUDA allocations tracked over all processes (the BPF map's size); more are "
        "counted as dropped."),
    Key("ebpf.max_process_series", Count(), 1024, RESTART,
        "Per node: processes beyond it (least active first) are counted in "
        "`gpu.process.cuda.series.overflow`, not exported one by one; container totals keep "
        "them."),
    Key("ebpf.workload_retention", Seconds(), 300.0, RESTART,
        "Seconds a container's CUDA totals outlive its last process, so a counter does not "
        "reset between short jobs."),
    # Health events: XID / ECC / lost / unresponsive / throttle, pushed as OTLP log records.
    Key("health.enabled", Flag(), True, RESTART,
        "Health events (XID, ECC, lost, unresponsive, throttling) as OTLP logs."),
    Key("health.kmsg", Flag(), True, RESTART,
        "Read XIDs from the kernel log (/dev/kmsg) as well as from NVML."),
    Key("health.storm_window", Seconds(), 10.0, RESTART,
        "Seconds over which a repeating event is summarised with a count."),
    Key("health.dedup_window", Seconds(), 2.0, RESTART,
        "Seconds within which the same XID from NVML and kmsg is one event."),
    Key("health.spool_path", Directory(nullable=True), "/var/lib/gpu-otel-agent/events",
        RESTART, "Directory of the health events' write-ahead spool (0700; every event is fsynced "
        "there before its first send and deleted once the collector accepted it); `null`: no "
        "spool (events are sent, not kept across a crash).", env=Env("GPU_AGENT_EVENT_SPOOL")),
    Key("health.spool_max_mib", Number(low=0.01, high=1_048_576, unit="MiB"), 16.0, RESTART,
        "Spool size limit (MiB); beyond it events are sent live, and dropped and counted "
        "while the collector is away."),
    Key("health.degrade_after", Count(minimum=1), 3, RESTART,
        "Slow-group reads in a row a gray-failure condition must hold before its subsystem is "
        "reported degraded (`gpu.degraded`); 3 reads at the default 10 s slow interval is the "
        "30 s DCGM's health watches and AMD's exporter poll at."),
    Key("health.clear_after", Count(minimum=1), 3, RESTART,
        "Slow-group reads in a row a raised gray-failure condition must be gone before "
        "`gpu.healthy` (with each condition's own clear threshold, so a value oscillating at "
        "a threshold does not flap)."),
    # The local read-only endpoint (gpu-agent top, check): a Unix socket, never over TCP.
    Key("local_endpoint.enabled", Flag(), True, RESTART,
        "Serve the snapshot and recent health events on a local Unix socket for "
        "`gpu-agent top` (read-only).", env=Env("GPU_AGENT_LOCAL_ENDPOINT_ENABLED")),
    Key("local_endpoint.socket", AbsolutePath(), "/run/gpu-otel-agent/agent.sock", RESTART,
        "Path of the socket (mode 0660); its directory must not be world-writable.",
        env=Env("GPU_AGENT_LOCAL_SOCKET")),
    Key("local_endpoint.group", Text(nullable=True), None, RESTART,
        "Group (name or number) that may read the socket besides its owner; `null`: the "
        "agent's own group.", env=Env("GPU_AGENT_LOCAL_GROUP")),
    Key("local_endpoint.recent_events", Count(minimum=1), 256, RESTART,
        "Health events kept for clients (oldest dropped first)."),
    # Fallbacks for the standard OTEL_EXPORTER_OTLP_* variables, which the exporter reads.
    Key("otlp.protocol", Choice(choices=OTLP_PROTOCOLS, nullable=True), None, RESTART,
        "`grpc` or `http/protobuf`; `null`: `grpc`.",
        exporter_env="OTEL_EXPORTER_OTLP_PROTOCOL"),
    Key("otlp.endpoint", OtlpEndpoint(nullable=True), None, RESTART,
        "Collector endpoint; for `http/protobuf` the base URL (`/v1/metrics` is appended).",
        exporter_env="OTEL_EXPORTER_OTLP_ENDPOINT"),
    Key("otlp.headers", StringMap(), {}, RESTART,
        "Headers sent with every export (`config show` prints their names only).",
        exporter_env="OTEL_EXPORTER_OTLP_HEADERS"),
    Key("otlp.insecure", Flag(nullable=True), None, RESTART, "Plain-text gRPC.",
        exporter_env="OTEL_EXPORTER_OTLP_INSECURE"),
    Key("otlp.compression", Choice(choices=("gzip", "none"), nullable=True), None, RESTART,
        "`gzip` or `none`.", exporter_env="OTEL_EXPORTER_OTLP_COMPRESSION"),
    Key("otlp.timeout", Seconds(nullable=True), None, RESTART, "Seconds per export.",
        exporter_env="OTEL_EXPORTER_OTLP_TIMEOUT"),
    Key("otlp.certificate", Text(nullable=True), None, RESTART, "CA certificate file.",
        exporter_env="OTEL_EXPORTER_OTLP_CERTIFICATE"),
    # Spans of the agent's own pipeline (exports, scrapes) over OTLP.
    Key("tracing.enabled", Flag(), False, RESTART,
        "Spans of the agent's own exports and scrapes, sent over OTLP like the metrics "
        "(the `OTEL_EXPORTER_OTLP_TRACES_*` variables apply).",
        env=Env("GPU_AGENT_TRACING_ENABLED")),
    Key("tracing.sample_ratio", Number(low=0.0, high=1.0), 1.0, RESTART,
        "Fraction of root spans kept (a parent's decision is followed)."),
    # The pull endpoint (/metrics, /healthz, /readyz).
    Key("prometheus.enabled", Flag(), False, RESTART,
        "Serve the snapshot for Prometheus to scrape.",
        env=Env("GPU_AGENT_PROMETHEUS_ENABLED")),
    Key("prometheus.listen", ListenAddress(), "0.0.0.0:9400", RESTART,
        "Address and port of the endpoint (dcgm-exporter's port, so scrape configs carry "
        "over).", env=Env("GPU_AGENT_PROMETHEUS_LISTEN")),
    Key("prometheus.scheme", Choice(choices=PROMETHEUS_SCHEMES), "otel", LIVE,
        "`otel` (OpenTelemetry names translated), `dcgm` (dcgm-exporter's names and labels, "
        "as up to 4.8) or `dcgm-4.9` (dcgm-exporter 4.9's: its 23 renamed default fields, "
        "eleven in new units, and the `DCGM_FI_SYSTEM_DRIVER_VERSION` label; "
        "docs/migration.md lists them).",
        env=Env("GPU_AGENT_PROMETHEUS_SCHEME")),
    Key("prometheus.dcgm_exporter_version", Choice(choices=DCGM_EXPORTER_RELEASES),
        DCGM_EXPORTER_RELEASES[-1], LIVE,
        "The dcgm-exporter release whose labels the `dcgm` scheme serves (`dcgm-4.9` serves "
        "the latest's): from 4.6.0-4.8.3 "
        "the host label is `hostname` (`Hostname` before), from 4.3.1-4.4.0 pods holding "
        "GPUs through DRA claims get the `dra_*` labels.",
        env=Env("GPU_AGENT_DCGM_EXPORTER_VERSION")),
    Key("prometheus.web_config_file", Text(nullable=True), None, RESTART,
        "TLS and basic auth, in the Prometheus exporters' web configuration format (the "
        "file's contents are re-read when it changes).",
        env=Env("GPU_AGENT_PROMETHEUS_WEB_CONFIG")),
    Key("prometheus.stall_after", Seconds(nullable=True), None, LIVE,
        "Seconds without a sample before /healthz fails; `null`: three of the shortest "
        "enabled group interval plus `call_timeout`."),
)

BY_KEY: Mapping[str, Key] = MappingProxyType({row.key: row for row in TABLE})
# The command-line flags of ``run`` and ``config show``, by flag, in table order.
FLAGS: Mapping[str, Key] = MappingProxyType(
    {row.flag: row for row in TABLE if row.flag is not None})
# Known group names; any other name under ``groups`` takes the ``groups.*`` rows.
GROUPS: tuple[str, ...] = tuple(dict.fromkeys(
    row.key.split(".")[1] for row in TABLE
    if row.key.startswith("groups.") and row.key.split(".")[1] != ANY_GROUP))


def pattern(dotted: str) -> str:
    """The table key for a dotted path: ``groups.mygroup.interval`` -> ``groups.*.interval``."""
    parts = dotted.split(".")
    if len(parts) >= 2 and parts[0] == "groups" and parts[1] not in GROUPS:
        parts[1] = ANY_GROUP
    return ".".join(parts)


def lookup(dotted: str) -> Key | None:
    return BY_KEY.get(pattern(dotted))


def children(section: str) -> list[str]:
    """Names directly under a section, in table order (``""`` is the top level)."""
    prefix = f"{pattern(section)}." if section else ""
    names = [row.key[len(prefix):].split(".")[0] for row in TABLE
             if row.key.startswith(prefix)]
    return [n for n in dict.fromkeys(names) if n != ANY_GROUP]


def default(key: str) -> Any:
    """A key's default as the typed configuration holds it (mappings read-only)."""
    row = BY_KEY[key]
    return row.kind.check(row.default)
