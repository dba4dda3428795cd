"""The machine a report was measured on: figures mean little without it."""

from __future__ import annotations

import os
import platform
from importlib import metadata
from pathlib import Path

PACKAGES = ("gpu-otel-agent", "nvitop", "nvitop-exporter", "gpustat", "opentelemetry-sdk",
            "nvidia-ml-py")


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 / 1024, 1)
    return float("nan")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def describe() -> dict[str, object]:
    return {
        "cpu_model": _cpu_model(),
        "logical_cores": os.cpu_count() or 0,
        # A container's CPU quota can be smaller than the core count; affinity shows the cpuset.
        "usable_cores": len(os.sched_getaffinity(0)),
        "memory_gib": _memory_gib(),
        "kernel": platform.release(),
        "os": platform.platform(),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES},
        # Other work on the machine skews CPU figures; the load at the end of the run shows it.
        "load_average_1m_5m_15m": [round(x, 2) for x in os.getloadavg()],
    }
