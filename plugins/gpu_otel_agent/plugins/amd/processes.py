"""Per-process GPU memory and engine use from ``amdsmi_get_gpu_process_list``.

amdsmi reports each process's engine time as cumulative nanoseconds (``engine_usage.gfx`` and
``.enc``), not as a percentage like NVML: the fraction is the growth of that counter over the
wall time between two reads. Reads closer together than :data:`MIN_WINDOW_NS` keep the last
figure instead (the driver's counters move in steps, so a short window is mostly noise). A
process's utilization is absent (never 0) until one window has passed, and a process that
leaves the list is forgotten.

The engine counters come from DRM fdinfo. A HIP process submits its work through /dev/kfd
(user-mode queues the DRM scheduler never sees), so its ``gfx`` time stays at 0 ns however busy
the GPU is: ``amd-smi process`` on a busy MI300X shows ``GFX: 0 ns`` next to
``CU_OCCUPANCY`` (ROCm device-metrics-exporter, ``internal/metricsmap.md``). A counter that did
not move over a window therefore says nothing, and no utilization is exported for it (never
0 %). What HIP work does show is KFD's per-process ``cu_occupancy`` ("Num CUs utilized",
``amdsmi_proc_info_t`` in ``amdsmi.h``; the exporter's ``GPU_PROCESS_CU_OCCUPANCY``), which
is exported as ``gpu.process.compute_unit.occupancy``: the fraction of the device's CUs.
amdsmi has reported it two ways: rocm_smi turned KFD's count into a percentage of the node's
CUs ("Adjust CU occupancy to percent", ``rocm_smi_kfd.cc`` at ROCm/amdsmi 0ceca28, and in
rocm-smi-lib at rocm-systems 1b1610f, Aug 2025), and the rework for ROCm 7.12 (rocm-systems PR
3589) reports the count as KFD has it (``rocm_smi_kfd.cc`` at rocm-systems 0c348d2). A figure
above 100 can only be a count; otherwise the library's version decides
(:func:`occupancy_is_percent`).

Newer ROCm names a process by its executable's path (``NAME: /usr/bin/python3.12`` in the
same ``amd-smi process`` output); only the base name is used.

Memory comes from DRM fdinfo, which prints KiB. amdsmi has converted that three ways: ``* 1024``
(ROCm/amdsmi ``fdinfo.cc`` at 0ceca28, ROCm 6.3), ``* 1000`` (at 0e0d8b7, the releases that name
processes by path: 2.3 % short of the bytes) and ``* kKiB`` again (rocm-systems at 5b3c8b5).
:func:`vram_bytes` tells them apart by the figure itself: a whole number of KiB times 1000 is a
multiple of 1000; times 1024 it is one of 1000 only when the KiB count is a multiple of 125.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpu_otel_agent.backends.process_lookup import CachedProcessLookup
from gpu_otel_agent.model.process import TASK_ENCODER, TASK_GENERAL, ProcessUsage
from gpu_otel_agent.model.workload import GpuProcess
from gpu_otel_agent.plugins.amd import sentinels
from gpu_otel_agent.plugins.amd.smi import number
from gpu_otel_agent.workloads.names import sanitize

LIST_CALL = "amdsmi_get_gpu_process_list"
MIN_WINDOW_NS = 500_000_000
_ENGINES = (("gfx", TASK_GENERAL), ("enc", TASK_ENCODER))


@dataclass
class _Track:
    since_ns: int  # start of the current window
    engines: dict[str, int]  # engine ns at the start of the window
    utilization: tuple[tuple[str, float], ...] = ()  # the last complete window's figures


class ProcessSampler:
    """Keeps the engine counters of one device's processes between reads."""

    def __init__(self, list_processes: Callable[[], list[dict[str, Any]]],
                 clock_ns: Callable[[], int] = time.monotonic_ns,
                 compute_units: Callable[[], int | None] = lambda: None,
                 percent: Callable[[], bool] = lambda: False) -> None:
        self._list = list_processes
        self._clock_ns = clock_ns
        self._compute_units = compute_units
        self._percent = percent
        self._tracks: dict[int, _Track] = {}

    def read(self) -> tuple[ProcessUsage, ...]:
        now = self._clock_ns()
        tracks: dict[int, _Track] = {}
        out = []
        for info in self._list():
            pid = int(info["pid"])
            vram = vram_bytes(number(info.get("memory_usage", {}).get("vram_mem")))
            engines = {key: int(v) for key, _ in _ENGINES
                       if (v := number(info.get("engine_usage", {}).get(key))) is not None}
            track = self._tracks.get(pid) or _Track(now, engines)
            if now - track.since_ns >= MIN_WINDOW_NS:
                wall = now - track.since_ns
                track = _Track(now, engines, tuple(
                    (task, min((engines[key] - track.engines[key]) / wall, 1.0))
                    for key, task in _ENGINES
                    if key in engines and key in track.engines
                    and engines[key] > track.engines[key]  # unmoved: KFD work, unknown
                ))
            tracks[pid] = track
            out.append(ProcessUsage(pid, None if vram is None else int(vram), track.utilization,
                                    self._occupancy(info.get("cu_occupancy"))))
        self._tracks = tracks
        return tuple(sorted(out, key=lambda p: p.pid))

    def _occupancy(self, raw: Any) -> float | None:
        value = sentinels.value(raw, 32)  # the wrapper says "N/A" for UINT32 max
        if value is None:
            return None
        if value <= 100 and self._percent():
            return min(value / 100, 1.0)
        total = self._compute_units()
        return min(value / total, 1.0) if total else None


# amdsmi_get_lib_version from which cu_occupancy is KFD's count (ROCm 7.12: the simulator's
# model of that release; the version number of the first count-reporting library is not in
# any capture).
OCCUPANCY_COUNT_FROM = (26, 12)


def occupancy_is_percent(smi: Any) -> bool:
    """Whether this library reports ``cu_occupancy`` as a percentage (see the module doc)."""
    try:
        version = smi.amdsmi_get_lib_version()
        return (int(version["major"]), int(version["minor"])) < OCCUPANCY_COUNT_FROM
    except (smi.AmdSmiException, KeyError, TypeError, ValueError):
        return True  # the libraries deployed (ROCm 6 and 7.0-7.2) give a percentage


def vram_bytes(reported: float | None) -> float | None:
    """Bytes from amdsmi's ``vram_mem``: a figure of KiB x 1000 (a multiple of 1000 that is
    not one of 1024, or one of both, since allocations are 4 KiB pages: 2 MiB buffers make
    every KiB count a multiple of 128) becomes KiB x 1024; a multiple of 1024 alone is bytes."""
    if reported is None:
        return None
    value = int(reported)
    if value % 1000 == 0:
        return value // 1000 * 1024
    return value


def process_name(raw: Any) -> str:
    """amdsmi's process name: ``comm`` in older ROCm, the executable's path in newer."""
    name = str(raw)
    return "" if name in ("", "N/A") else os.path.basename(name)


def amd_process_lookup(smi: Any, handles: Mapping[str, Any]) -> CachedProcessLookup:
    """The processes on each AMD GPU, for health events when attribution is off: PIDs and
    names from amdsmi's process list. ``handles`` maps a ``hw.id`` to its processor handle, or
    to a tuple of them (a partitioned GPU: all its partitions)."""

    def query(handle: Any) -> tuple[GpuProcess, ...] | None:
        # A partitioned GPU is its partitions' handles (a tuple): KFD lists each one's own.
        listed: list[dict[str, Any]] = []
        try:
            for one in handle if isinstance(handle, tuple) else (handle,):
                listed.extend(smi.amdsmi_get_gpu_process_list(one))
        except smi.AmdSmiException:
            return None
        # Names come from the process itself: sanitised like every other exported name.
        return tuple(GpuProcess(int(p["pid"]), sanitize(process_name(p["name"])))
                     for p in listed)

    return CachedProcessLookup(handles, query)
