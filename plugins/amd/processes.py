"""Per-process GPU memory and engine use from ``amdsmi_get_gpu_process_list``.

amdsmi reports each process's engine time as cumulative nanoseconds (``engine_usage.gfx`` and
``.enc``), not as a percentage like NVML: the fraction is the growth of that counter over the
wall time between two reads. Reads closer together than :data:`MIN_WINDOW_NS` keep the last
figure instead (the driver's counters move in steps, so a short window is mostly noise). A
process's utilization is absent (never 0) until one window has passed, and a process that
leaves the list is forgotten.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from gpu_otel_agent.backends.process_lookup import CachedProcessLookup
from gpu_otel_agent.model.process import TASK_ENCODER, TASK_GENERAL, ProcessUsage
from gpu_otel_agent.model.workload import GpuProcess
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
                 clock_ns: Callable[[], int] = time.monotonic_ns) -> None:
        self._list = list_processes
        self._clock_ns = clock_ns
        self._tracks: dict[int, _Track] = {}

    def read(self) -> tuple[ProcessUsage, ...]:
        now = self._clock_ns()
        tracks: dict[int, _Track] = {}
        out = []
        for info in self._list():
            pid = int(info["pid"])
            vram = number(info.get("memory_usage", {}).get("vram_mem"))
            engines = {key: int(v) for key, _ in _ENGINES
                       if (v := number(info.get("engine_usage", {}).get(key))) is not None}
            track = self._tracks.get(pid) or _Track(now, engines)
            if now - track.since_ns >= MIN_WINDOW_NS:
                wall = now - track.since_ns
                track = _Track(now, engines, tuple(
                    (task, min((engines[key] - track.engines[key]) / wall, 1.0))
                    for key, task in _ENGINES
                    if key in engines and key in track.engines
                    and engines[key] >= track.engines[key]
                ))
            tracks[pid] = track
            out.append(ProcessUsage(pid, None if vram is None else int(vram), track.utilization))
        self._tracks = tracks
        return tuple(sorted(out, key=lambda p: p.pid))


def amd_process_lookup(smi: Any, handles: Mapping[str, Any]) -> CachedProcessLookup:
    """The processes on each AMD GPU, for health events when attribution is off: PIDs and
    names from amdsmi's process list."""

    def query(handle: Any) -> tuple[GpuProcess, ...] | None:
        try:
            listed = smi.amdsmi_get_gpu_process_list(handle)
        except smi.AmdSmiException:
            return None
        # Names come from the process itself: sanitised like every other exported name.
        return tuple(GpuProcess(int(p["pid"]), "" if p["name"] == "N/A" else sanitize(p["name"]))
                     for p in listed)

    return CachedProcessLookup(handles, query)
