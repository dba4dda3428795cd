"""Built-in defaults, the lowest layer under file, environment and flags."""

from __future__ import annotations

from typing import Any

# The fast group feeds dashboards and autoscaling; the slow group reads counters that change
# rarely and cost more calls; GPM needs two samples, so its interval is the averaging window.
DEFAULTS: dict[str, Any] = {
    "exporter": "otlp",
    "export_interval": 10.0,
    "call_timeout": 2.0,
    "lost_reprobe_interval": 30.0,
    "shutdown_timeout": 3.0,
    "log_level": "info",
    "node_name": None,
    "groups": {
        "fast": {"enabled": True, "interval": 5.0},
        "slow": {"enabled": True, "interval": 30.0},
        "gpm": {"enabled": True, "interval": 10.0},
        "processes": {"enabled": True, "interval": 5.0},
    },
    # Per-process / per-container attribution (agent/workloads, plugins/kubernetes).
    "attribution": {
        "enabled": True,
        "max_process_series": 256,  # per GPU; the rest is counted, never merged
        "export_command_line": False,  # command lines hold secrets: off unless asked
        "reconcile_interval": 60.0,
        "proc_root": "/proc",
        "cgroup_root": "/sys/fs/cgroup",
        "memory_resources": {},  # device-plugin resource -> bytes per allocated unit
        "kubelet": {
            "socket": "/var/lib/kubelet/pod-resources/kubelet.sock",  # null: names off
            "refresh_interval": 30.0,
            "timeout": 5.0,
        },
        "process_events": "netlink",  # or "ebpf" (needs ebpf.enabled): exec/exit source
    },
    # Per-process CUDA activity from eBPF uprobes (plugins/ebpf); needs CAP_BPF + CAP_PERFMON.
    "ebpf": {
        "enabled": False,
        "object_path": None,  # null: the BPF object built into the package
        "interval": 1.0,  # seconds between counter reads and library scans
        "max_allocations": 65536,  # live CUDA allocations tracked (BPF map size)
        "max_process_series": 1024,  # per node; the rest is counted, never merged
        "workload_retention": 300.0,  # seconds a container's totals outlive its last process
    },
    # Health events: XID / ECC / lost / unresponsive / throttle, pushed as OTLP log records.
    "health": {
        "enabled": True,
        "kmsg": True,  # also read NVRM Xid lines from /dev/kmsg
        "storm_window": 10.0,  # seconds: repeats of one event per GPU are summarised per window
        "dedup_window": 2.0,  # seconds: an XID seen by NVML and kmsg within it is sent once
        "spool_path": "/var/lib/gpu-otel-agent/events",  # events the collector did not take
        "spool_max_mib": 16.0,
    },
    "otlp": {
        "protocol": None,
        "endpoint": None,
        "headers": {},
        "insecure": None,
        "compression": None,
        "timeout": None,
        "certificate": None,
    },
    "tracing": {"enabled": False, "sample_ratio": 1.0},
    "prometheus": {
        "enabled": False,
        "listen": "0.0.0.0:9400",
        "scheme": "otel",
        "web_config_file": None,
        "stall_after": None,
    },
}
