"""What each configuration key means, for ``docs/config.md`` (generated, like the metric table).

Keys come from :data:`gpu_otel_agent.config.defaults.DEFAULTS`, so a key cannot be missing from
the doc;a key without an entry here is listed with a dash until someone says what it does.
"""

from __future__ import annotations

from typing import Any

from gpu_otel_agent.config.defaults import DEFAULTS
from gpu_otel_agent.config.load import ENV_KEYS

# Mappings whose keys are data (names chosen by the user), documented as one key.
FREE_FORM = frozenset({"otlp.headers", "attribution.memory_resources"})

DESCRIPTIONS: dict[str, str] = {
    "exporter": "`otlp` (push to a collector) or `console` (print).",
    "export_interval": "Seconds between exports.",
    "call_timeout": "Seconds a device call may take before the GPU is reported unresponsive.",
    "lost_reprobe_interval": "Seconds between probes of a GPU that fell off the bus.",
    "shutdown_timeout": "Seconds the final export may take on SIGTERM.",
    "log_level": "`debug`, `info`, `warning` or `error`.",
    "node_name": "`k8s.node.name` of the resource.",
    "groups.fast.enabled": "Utilization, memory, power, temperature, energy, PCIe, SM clock.",
    "groups.fast.interval": "Seconds between fast-group reads.",
    "groups.slow.enabled": "ECC, remapped rows, retired pages, violations, NVLink, encoder/"
                           "decoder, fan, P-state, throttle reasons, other clocks.",
    "groups.slow.interval": "Seconds between slow-group reads.",
    "groups.gpm.enabled": "SM / tensor / DRAM activity (GPM, Hopper and newer).",
    "groups.gpm.interval": "Seconds between GPM reads (the averaging window).",
    "groups.processes.enabled": "Per-process and per-container GPU use (`gpu.process.*`, "
                                "`gpu.container.*`).",
    "groups.processes.interval": "Seconds between process-list reads.",
    "attribution.enabled": "Attribute GPU use to processes, containers, pods and Slurm jobs.",
    "attribution.max_process_series": "Per GPU: processes beyond it (smallest memory first) "
                                      "are counted in `gpu.process.series.overflow`, not "
                                      "exported one by one; container totals keep them.",
    "attribution.export_command_line": "Add `process.command_line` (sanitised, 1024 "
                                       "characters at most). Off: command lines hold secrets.",
    "attribution.reconcile_interval": "Seconds between re-checks of the GPU processes held "
                                      "(events do the work; this catches what they missed).",
    "attribution.proc_root": "Where the host's /proc is mounted.",
    "attribution.cgroup_root": "Where the host's cgroup hierarchies are mounted.",
    "attribution.memory_resources": "Fractional GPU device plugins: resource name -> bytes per "
                                    "allocated unit, for `gpu.container.memory.limit`.",
    "attribution.kubelet.socket": "The kubelet pod-resources socket; `null` turns pod names off.",
    "attribution.kubelet.refresh_interval": "Seconds between `List` calls besides those a new "
                                            "pod or a kubelet restart triggers.",
    "attribution.kubelet.timeout": "Seconds a pod-resources call may take.",
    "otlp.protocol": "`grpc` or `http/protobuf` (OTEL_EXPORTER_OTLP_PROTOCOL wins).",
    "otlp.endpoint": "Collector endpoint (OTEL_EXPORTER_OTLP_ENDPOINT wins).",
    "otlp.headers": "Headers sent with every export (OTEL_EXPORTER_OTLP_HEADERS wins).",
    "otlp.insecure": "Plain-text gRPC (OTEL_EXPORTER_OTLP_INSECURE wins).",
    "otlp.compression": "`gzip` or `none` (OTEL_EXPORTER_OTLP_COMPRESSION wins).",
    "otlp.timeout": "Seconds per export (OTEL_EXPORTER_OTLP_TIMEOUT wins).",
    "otlp.certificate": "CA certificate file (OTEL_EXPORTER_OTLP_CERTIFICATE wins).",
    "health.enabled": "Health events (XID, ECC, lost, unresponsive, throttling) as OTLP logs.",
    "health.kmsg": "Read XIDs from the kernel log (/dev/kmsg) as well as from NVML.",
    "health.storm_window": "Seconds over which a repeating event is summarised with a count.",
    "health.dedup_window": "Seconds within which the same XID from NVML and kmsg is one event.",
    "health.spool_path": "Directory of the on-disk spool for events the collector did not "
                         "accept.",
    "health.spool_max_mib": "Spool size limit (MiB); overflow is counted.",
    "prometheus.enabled": "Serve the snapshot for Prometheus to scrape.",
    "prometheus.listen": "Address and port of the endpoint.",
    "prometheus.scheme": "`otel` (OpenTelemetry names translated) or `dcgm` (dcgm-exporter "
                         "names and labels).",
    "prometheus.web_config_file": "TLS and basic auth, in the Prometheus exporters' web "
                                  "configuration format.",
    "prometheus.stall_after": "Seconds without a sample before /healthz fails.",
}


def leaves(tree: dict[str, Any] = DEFAULTS, prefix: str = "") -> list[tuple[str, Any]]:
    """Every configuration key, dotted, with its default, in file order."""
    found: list[tuple[str, Any]] = []
    for key, value in tree.items():
        dotted = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict) and dotted not in FREE_FORM:
            found.extend(leaves(value, dotted))
        else:
            found.append((dotted, value))
    return found


def _default(value: Any) -> str:
    if value is None:
        return "`null`"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, dict):
        return "`{}`" if not value else f"`{value}`"
    return f"`{value}`"


def config_markdown() -> str:
    env: dict[str, list[str]] = {}
    for name, (dotted, _scale) in ENV_KEYS.items():
        env.setdefault(dotted, []).append(f"`{name}`")
    lines = [
        "# Configuration",
        "",
        "<!-- Generated by `gpu-agent docs config --output docs/config.md`; do not edit. -->",
        "",
        "Every key of the YAML file (`--config FILE`), all optional. Precedence: command-line "
        "flags over environment over the file over these defaults.",
        "",
        "| key | default | environment | meaning |",
        "| --- | --- | --- | --- |",
    ]
    for dotted, value in leaves():
        variables = ", ".join(env.get(dotted, [])) or "—"
        lines.append(f"| `{dotted}` | {_default(value)} | {variables} | "
                     f"{DESCRIPTIONS.get(dotted, '—')} |")
    lines.append("")
    return "\n".join(lines)
