"""Processes on a GPU for health events when attribution is off: NVML PIDs, /proc names.

This is the cheap part of attribution (no cgroups, no pods): enough to say which processes an
XID hit. Containers and pods come from the workload resolver through the same seam
(:class:`agent.model.workload.WorkloadLookup`). Answers are cached briefly, so an XID storm
costs one NVML query per GPU per ``TTL_S``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pynvml

from agent.model.workload import GpuProcess

TTL_S = 1.0
PROC = Path("/proc")


def executable_name(pid: int, proc: Path = PROC) -> str:
    try:
        return (proc / str(pid) / "comm").read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""  # the process is already gone


class NvmlProcessLookup:
    def __init__(self, handles: Mapping[str, Any]) -> None:
        self._handles = dict(handles)
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, tuple[GpuProcess, ...]]] = {}

    def processes_on(self, uuid: str) -> tuple[GpuProcess, ...]:
        handle = self._handles.get(uuid)
        if handle is None:
            return ()
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(uuid)
        if cached is not None and now - cached[0] < TTL_S:
            return cached[1]
        pids: list[int] = []
        for query in (pynvml.nvmlDeviceGetComputeRunningProcesses,
                      pynvml.nvmlDeviceGetGraphicsRunningProcesses):
            try:
                for info in query(handle):
                    if info.pid not in pids:
                        pids.append(int(info.pid))
            except pynvml.NVMLError:
                continue  # not supported, or the GPU is lost: what we have is all we know
        found = tuple(GpuProcess(pid, executable_name(pid)) for pid in pids)
        with self._lock:
            self._cache[uuid] = (now, found)
        return found
