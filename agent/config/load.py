"""Layered configuration: defaults < YAML file < environment < command-line flags.

Every value remembers where it came from, so a validation error can say "groups.fast.interval
in /etc/gpu-agent.yaml: must be a positive number" instead of failing somewhere later.
"""

from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from gpu_otel_agent.config.defaults import DEFAULTS
from gpu_otel_agent.config.schema import (
    EXPORTERS,
    LOG_LEVELS,
    OTLP_PROTOCOLS,
    PROCESS_EVENT_SOURCES,
    PROMETHEUS_SCHEMES,
    AgentConfig,
    AttributionConfig,
    EbpfConfig,
    GroupConfig,
    HealthConfig,
    KubeletConfig,
    OtlpConfig,
    PrometheusConfig,
    TracingConfig,
)


class ConfigError(ValueError):
    """A configuration value is wrong; the message names the key, its origin and the problem."""


@dataclass(frozen=True)
class Overrides:
    """Values given on the command line; None means "not given"."""

    interval: float | None = None
    export_interval: float | None = None
    exporter: str | None = None
    log_level: str | None = None


# Environment variables the agent reads itself (the OTel exporters read OTEL_EXPORTER_OTLP_*).
ENV_KEYS: Mapping[str, tuple[str, float]] = MappingProxyType(
    {
        # name -> (dotted key, scale into the key's unit)
        "OTEL_METRIC_EXPORT_INTERVAL": ("export_interval", 0.001),  # milliseconds, per the spec
        "GPU_AGENT_EXPORT_INTERVAL": ("export_interval", 1.0),
        "GPU_AGENT_INTERVAL": ("groups.fast.interval", 1.0),
        "GPU_AGENT_EXPORTER": ("exporter", 1.0),
        "GPU_AGENT_LOG_LEVEL": ("log_level", 1.0),
        "GPU_AGENT_NODE_NAME": ("node_name", 1.0),
        "K8S_NODE_NAME": ("node_name", 1.0),
        "GPU_AGENT_EVENT_SPOOL": ("health.spool_path", 1.0),
        "GPU_AGENT_PROMETHEUS_ENABLED": ("prometheus.enabled", 1.0),
        "GPU_AGENT_PROMETHEUS_LISTEN": ("prometheus.listen", 1.0),
        "GPU_AGENT_PROMETHEUS_SCHEME": ("prometheus.scheme", 1.0),
        "GPU_AGENT_PROMETHEUS_WEB_CONFIG": ("prometheus.web_config_file", 1.0),
        "GPU_AGENT_TRACING_ENABLED": ("tracing.enabled", 1.0),
        "GPU_AGENT_KUBELET_SOCKET": ("attribution.kubelet.socket", 1.0),
        "GPU_AGENT_EBPF_ENABLED": ("ebpf.enabled", 1.0),
    }
)
NUMERIC_KEYS = frozenset(
    {"export_interval", "call_timeout", "lost_reprobe_interval", "shutdown_timeout",
     "health.storm_window", "health.dedup_window", "health.spool_max_mib"}
)


class _Layers:
    """The merged raw tree plus the origin of every leaf that was set above the defaults."""

    def __init__(self) -> None:
        self.tree: dict[str, Any] = copy.deepcopy(DEFAULTS)
        self.origin: dict[str, str] = {}

    def set(self, dotted: str, value: Any, origin: str) -> None:
        *parents, leaf = dotted.split(".")
        node = self.tree
        for part in parents:
            child = node.get(part)
            if not isinstance(child, dict):
                child = {}
                node[part] = child
            node = child
        node[leaf] = value
        self.origin[dotted] = origin

    def where(self, dotted: str) -> str:
        return self.origin.get(dotted, "defaults")


def _walk_file(data: Any, prefix: str, defaults: Any, layers: _Layers, origin: str) -> None:
    if not isinstance(data, dict):
        raise ConfigError(f"{prefix or 'top level'} in {origin}: expected a mapping")
    for key, value in data.items():
        dotted = f"{prefix}.{key}" if prefix else str(key)
        known = isinstance(defaults, dict) and key in defaults
        # Groups may be added by plugins later; only the known subtrees are checked strictly.
        if not known and prefix != "groups":
            allowed = ", ".join(sorted(defaults)) if isinstance(defaults, dict) else ""
            raise ConfigError(f"{dotted} in {origin}: unknown key (known: {allowed})")
        sub_default = defaults.get(key) if isinstance(defaults, dict) else None
        if prefix == "groups" and not known:
            sub_default = {"enabled": True, "interval": 10.0}
        if isinstance(sub_default, dict) and key not in ("headers", "memory_resources"):
            _walk_file(value, dotted, sub_default, layers, origin)
        else:
            layers.set(dotted, value, origin)


def read_file(path: Path, layers: _Layers) -> None:
    origin = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"cannot read configuration file {path}: {exc.strerror}") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    if data is None:
        return
    _walk_file(data, "", DEFAULTS, layers, origin)


def load(
    path: Path | None,
    overrides: Overrides = Overrides(),
    environ: Mapping[str, str] | None = None,
) -> AgentConfig:
    env = os.environ if environ is None else environ
    layers = _Layers()
    if path is not None:
        read_file(path, layers)
    for name, (dotted, scale) in ENV_KEYS.items():
        if name in env:
            raw: Any = env[name]
            if dotted in NUMERIC_KEYS or dotted.endswith(".interval"):
                raw = _number(raw, dotted, f"environment variable {name}") * scale
            layers.set(dotted, raw, f"environment variable {name}")
    flags = {
        "groups.fast.interval": overrides.interval,
        "export_interval": overrides.export_interval,
        "exporter": overrides.exporter,
        "log_level": overrides.log_level,
    }
    for dotted, value in flags.items():
        if value is not None:
            layers.set(dotted, value, "command line")
    return _validate(layers)


def _number(value: Any, dotted: str, origin: str) -> float:
    if isinstance(value, bool):
        raise ConfigError(f"{dotted} in {origin}: expected a number, got {value!r}")
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{dotted} in {origin}: expected a number, got {value!r}") from None


def _positive(layers: _Layers, dotted: str, value: Any) -> float:
    number = _number(value, dotted, layers.where(dotted))
    if not number > 0 or number == float("inf"):
        raise ConfigError(
            f"{dotted} in {layers.where(dotted)}: must be a positive number of seconds, "
            f"got {value!r}"
        )
    return number


def _choice(layers: _Layers, dotted: str, value: Any, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise ConfigError(
            f"{dotted} in {layers.where(dotted)}: must be one of {', '.join(choices)}, "
            f"got {value!r}"
        )
    return str(value)


def _optional_str(layers: _Layers, dotted: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{dotted} in {layers.where(dotted)}: expected a non-empty string")
    return value


def _optional_bool(layers: _Layers, dotted: str, value: Any) -> bool | None:
    if value is None or isinstance(value, bool):
        return value
    raise ConfigError(f"{dotted} in {layers.where(dotted)}: expected true or false")


def _validate(layers: _Layers) -> AgentConfig:
    tree = layers.tree
    groups: dict[str, GroupConfig] = {}
    for name, raw in tree["groups"].items():
        if not isinstance(raw, dict):
            raise ConfigError(f"groups.{name} in {layers.where(f'groups.{name}')}: expected a "
                              "mapping with enabled and interval")
        unknown = set(raw) - {"enabled", "interval"}
        if unknown:
            key = f"groups.{name}.{sorted(unknown)[0]}"
            raise ConfigError(f"{key} in {layers.where(key)}: unknown key (known: enabled, "
                              "interval)")
        enabled = raw.get("enabled", True)
        if not isinstance(enabled, bool):
            key = f"groups.{name}.enabled"
            raise ConfigError(f"{key} in {layers.where(key)}: expected true or false")
        interval = _positive(layers, f"groups.{name}.interval", raw.get("interval", 10.0))
        groups[name] = GroupConfig(enabled=enabled, interval=interval)

    otlp = tree["otlp"]
    headers = otlp.get("headers") or {}
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
    ):
        raise ConfigError(f"otlp.headers in {layers.where('otlp.headers')}: expected a mapping "
                          "of strings to strings")
    protocol = otlp.get("protocol")
    timeout = otlp.get("timeout")
    otlp_config = OtlpConfig(
        protocol=None if protocol is None else _choice(
            layers, "otlp.protocol", protocol, OTLP_PROTOCOLS),
        endpoint=_optional_str(layers, "otlp.endpoint", otlp.get("endpoint")),
        headers=MappingProxyType(dict(headers)),
        insecure=_optional_bool(layers, "otlp.insecure", otlp.get("insecure")),
        compression=None if otlp.get("compression") is None else _choice(
            layers, "otlp.compression", otlp["compression"], ("gzip", "none")),
        timeout=None if timeout is None else _positive(layers, "otlp.timeout", timeout),
        certificate=_optional_str(layers, "otlp.certificate", otlp.get("certificate")),
    )
    log_level = str(tree["log_level"]).lower()
    attribution = _attribution(layers, tree["attribution"])
    health = _health(layers, tree["health"])
    return AgentConfig(
        prometheus=_prometheus(layers, tree["prometheus"]),
        tracing=_tracing(layers, tree["tracing"]),
        exporter=_choice(layers, "exporter", tree["exporter"], EXPORTERS),
        export_interval=_positive(layers, "export_interval", tree["export_interval"]),
        call_timeout=_positive(layers, "call_timeout", tree["call_timeout"]),
        lost_reprobe_interval=_positive(
            layers, "lost_reprobe_interval", tree["lost_reprobe_interval"]),
        shutdown_timeout=_positive(layers, "shutdown_timeout", tree["shutdown_timeout"]),
        log_level=_choice(layers, "log_level", log_level, LOG_LEVELS),
        node_name=_optional_str(layers, "node_name", tree["node_name"]),
        groups=MappingProxyType(groups),
        otlp=otlp_config,
        health=health,
        attribution=attribution,
        ebpf=_ebpf(layers, tree["ebpf"]),
    )


def _bool(layers: _Layers, dotted: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{dotted} in {layers.where(dotted)}: expected true or false, "
                          f"got {value!r}")
    return value


def _count(layers: _Layers, dotted: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{dotted} in {layers.where(dotted)}: expected a whole number >= 0, "
                          f"got {value!r}")
    return value


def _attribution(layers: _Layers, raw: dict[str, Any]) -> AttributionConfig:
    resources = raw.get("memory_resources") or {}
    where = layers.where("attribution.memory_resources")
    if not isinstance(resources, dict):
        raise ConfigError(f"attribution.memory_resources in {where}: expected a mapping of "
                          "resource name to bytes per unit")
    for name, size in resources.items():
        if not isinstance(name, str) or isinstance(size, bool) or not isinstance(size, int) \
                or size <= 0:
            raise ConfigError(f"attribution.memory_resources in {where}: {name!r}: expected a "
                              f"positive whole number of bytes per unit, got {size!r}")
    kubelet = raw["kubelet"]
    socket = kubelet.get("socket")
    if socket is not None and (not isinstance(socket, str) or not socket.startswith("/")):
        raise ConfigError(f"attribution.kubelet.socket in "
                          f"{layers.where('attribution.kubelet.socket')}: expected an absolute "
                          f"path or null, got {socket!r}")
    for key in ("proc_root", "cgroup_root"):
        value = raw[key]
        if not isinstance(value, str) or not value.startswith("/"):
            raise ConfigError(f"attribution.{key} in {layers.where('attribution.' + key)}: "
                              f"expected an absolute path, got {value!r}")
    return AttributionConfig(
        enabled=_bool(layers, "attribution.enabled", raw["enabled"]),
        max_process_series=_count(layers, "attribution.max_process_series",
                                  raw["max_process_series"]),
        export_command_line=_bool(layers, "attribution.export_command_line",
                                  raw["export_command_line"]),
        reconcile_interval=_positive(layers, "attribution.reconcile_interval",
                                     raw["reconcile_interval"]),
        proc_root=raw["proc_root"],
        cgroup_root=raw["cgroup_root"],
        memory_resources=MappingProxyType(dict(resources)),
        kubelet=KubeletConfig(
            socket=socket,
            refresh_interval=_positive(layers, "attribution.kubelet.refresh_interval",
                                       kubelet["refresh_interval"]),
            timeout=_positive(layers, "attribution.kubelet.timeout", kubelet["timeout"]),
        ),
        process_events=_choice(layers, "attribution.process_events", raw["process_events"],
                               PROCESS_EVENT_SOURCES),
    )


def _ebpf(layers: _Layers, raw: dict[str, Any]) -> EbpfConfig:
    path = _optional_str(layers, "ebpf.object_path", raw["object_path"])
    if path is not None and not path.startswith("/"):
        raise ConfigError(f"ebpf.object_path in {layers.where('ebpf.object_path')}: expected an "
                          f"absolute path or null, got {path!r}")
    allocations = _count(layers, "ebpf.max_allocations", raw["max_allocations"])
    if allocations < 1:
        raise ConfigError(f"ebpf.max_allocations in {layers.where('ebpf.max_allocations')}: "
                          "must be at least 1")
    return EbpfConfig(
        enabled=_switch(layers, "ebpf.enabled", raw["enabled"]),
        object_path=path,
        interval=_positive(layers, "ebpf.interval", raw["interval"]),
        max_allocations=allocations,
        max_process_series=_count(layers, "ebpf.max_process_series", raw["max_process_series"]),
        workload_retention=_positive(layers, "ebpf.workload_retention",
                                     raw["workload_retention"]),
    )


_BOOL_WORDS = {"true": True, "1": True, "yes": True, "false": False, "0": False, "no": False}


def _switch(layers: _Layers, dotted: str, value: Any) -> bool:
    """A bool that may come from an environment variable as a word (true/1/yes, false/0/no)."""
    if isinstance(value, str) and value.lower() in _BOOL_WORDS:
        value = _BOOL_WORDS[value.lower()]
    return _bool(layers, dotted, value)


def _listen_address(layers: _Layers, dotted: str, value: Any) -> str:
    """``host:port`` (``[::]:9400`` for IPv6); the port must be a number, 0 to 65535."""
    text = _optional_str(layers, dotted, value)
    host, sep, port = (text or "").rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535 or " " in host:
        raise ConfigError(f"{dotted} in {layers.where(dotted)}: expected host:port such as "
                          f"0.0.0.0:9400 or [::]:9400, got {value!r}")
    return str(text)


def _tracing(layers: _Layers, raw: Any) -> TracingConfig:
    enabled = _switch(layers, "tracing.enabled", raw.get("enabled", False))
    ratio = _number(raw.get("sample_ratio", 1.0), "tracing.sample_ratio",
                    layers.where("tracing.sample_ratio"))
    if not 0 <= ratio <= 1:
        key = "tracing.sample_ratio"
        raise ConfigError(f"{key} in {layers.where(key)}: must be between 0 and 1, got {ratio}")
    return TracingConfig(enabled=enabled, sample_ratio=ratio)


def _prometheus(layers: _Layers, raw: Any) -> PrometheusConfig:
    enabled = _switch(layers, "prometheus.enabled", raw.get("enabled", False))
    stall = raw.get("stall_after")
    return PrometheusConfig(
        enabled=enabled,
        listen=_listen_address(layers, "prometheus.listen", raw.get("listen")),
        scheme=_choice(layers, "prometheus.scheme", raw.get("scheme"), PROMETHEUS_SCHEMES),
        web_config_file=_optional_str(
            layers, "prometheus.web_config_file", raw.get("web_config_file")),
        stall_after=None if stall is None else _positive(
            layers, "prometheus.stall_after", stall),
    )


def _health(layers: _Layers, raw: dict[str, Any]) -> HealthConfig:
    spool_path = raw["spool_path"]
    if spool_path is not None and (not isinstance(spool_path, str) or not spool_path.strip()):
        raise ConfigError(
            f"health.spool_path in {layers.where('health.spool_path')}: expected a directory "
            f"path, or null for no spool, got {spool_path!r}")
    max_mib = _number(raw["spool_max_mib"], "health.spool_max_mib",
                      layers.where("health.spool_max_mib"))
    if not 0.01 <= max_mib <= 1_048_576:
        raise ConfigError(
            f"health.spool_max_mib in {layers.where('health.spool_max_mib')}: must be between "
            f"0.01 and 1048576 (MiB), got {raw['spool_max_mib']!r}")
    return HealthConfig(
        enabled=_bool(layers, "health.enabled", raw["enabled"]),
        kmsg=_bool(layers, "health.kmsg", raw["kmsg"]),
        storm_window=_positive(layers, "health.storm_window", raw["storm_window"]),
        dedup_window=_positive(layers, "health.dedup_window", raw["dedup_window"]),
        spool_path=spool_path,
        spool_max_mib=max_mib,
    )


def to_tree(config: AgentConfig) -> dict[str, Any]:
    """The effective configuration as plain data, for ``gpu-agent config show``."""
    return {
        "exporter": config.exporter,
        "export_interval": config.export_interval,
        "call_timeout": config.call_timeout,
        "lost_reprobe_interval": config.lost_reprobe_interval,
        "shutdown_timeout": config.shutdown_timeout,
        "log_level": config.log_level,
        "node_name": config.node_name,
        "groups": {
            name: {"enabled": g.enabled, "interval": g.interval}
            for name, g in config.groups.items()
        },
        "health": {
            "enabled": config.health.enabled,
            "kmsg": config.health.kmsg,
            "storm_window": config.health.storm_window,
            "dedup_window": config.health.dedup_window,
            "spool_path": config.health.spool_path,
            "spool_max_mib": config.health.spool_max_mib,
        },
        "otlp": {
            "protocol": config.otlp.protocol,
            "endpoint": config.otlp.endpoint,
            "headers": {k: "<redacted>" for k in config.otlp.headers},
            "insecure": config.otlp.insecure,
            "compression": config.otlp.compression,
            "timeout": config.otlp.timeout,
            "certificate": config.otlp.certificate,
        },
        "prometheus": dataclasses.asdict(config.prometheus),
        "tracing": dataclasses.asdict(config.tracing),
        "attribution": {
            "enabled": config.attribution.enabled,
            "max_process_series": config.attribution.max_process_series,
            "export_command_line": config.attribution.export_command_line,
            "reconcile_interval": config.attribution.reconcile_interval,
            "proc_root": config.attribution.proc_root,
            "cgroup_root": config.attribution.cgroup_root,
            "memory_resources": dict(config.attribution.memory_resources),
            "kubelet": {
                "socket": config.attribution.kubelet.socket,
                "refresh_interval": config.attribution.kubelet.refresh_interval,
                "timeout": config.attribution.kubelet.timeout,
            },
            "process_events": config.attribution.process_events,
        },
        "ebpf": dataclasses.asdict(config.ebpf),
    }
