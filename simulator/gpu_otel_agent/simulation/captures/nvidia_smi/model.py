"""A capture of ``nvidia-smi -q`` as frozen dataclasses, values as printed (strings)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ProcessCapture:
    pid: int
    type: str  # as printed: C, G, C+G, M, M+C
    name: str
    used_memory: str | None  # "1234 MiB", "N/A"
    gpu_instance_id: int | None  # None: N/A (not on a MIG instance)
    compute_instance_id: int | None


@dataclass(frozen=True)
class MigDeviceCapture:
    index: int | None  # the MIG device index, where printed
    gpu_instance_id: int
    compute_instance_id: int
    sm_count: int | None  # device_attributes/shared/multiprocessor_count
    memory_total: str | None  # fb_memory_usage/total, as printed
    memory_used: str | None


@dataclass(frozen=True)
class GpuCapture:
    values: Mapping[str, str]  # fields.FIELDS key -> the value as printed (present fields only)
    clock_events: Mapping[str, str]  # reason name -> "Active" / "Not Active" / "N/A"
    mig_mode: str | None  # "Enabled", "Disabled", "N/A"; None: not printed
    mig_devices: tuple[MigDeviceCapture, ...]
    processes: tuple[ProcessCapture, ...]
    # Printed fields the reader met in a section it reads but could not place (path, value):
    # a spelling no row of the field table knows (a newer driver's rename) is listed, never
    # dropped silently.
    unplaced: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class SmiCapture:
    source: Path
    form: str  # "xml" | "text"
    timestamp: str | None
    driver_version: str | None
    cuda_version: str | None
    gpus: tuple[GpuCapture, ...]
