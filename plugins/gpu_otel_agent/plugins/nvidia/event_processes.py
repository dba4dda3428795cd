"""Processes on a GPU for health events when attribution is off: NVML PIDs, /proc names.

This is the cheap part of attribution (no cgroups, no pods): enough to say which processes an
XID hit. The caching is :class:`gpu_otel_agent.backends.process_lookup.CachedProcessLookup`'s.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pynvml

from gpu_otel_agent.backends.process_lookup import CachedProcessLookup
from gpu_otel_agent.model.workload import GpuProcess
from gpu_otel_agent.workloads.procfs import ProcReader

_PROC = ProcReader()


def _nvml_processes(handle: Any) -> tuple[GpuProcess, ...]:
    pids: list[int] = []
    for query in (pynvml.nvmlDeviceGetComputeRunningProcesses,
                  pynvml.nvmlDeviceGetGraphicsRunningProcesses):
        try:
            for info in query(handle):
                if info.pid not in pids:
                    pids.append(int(info.pid))
        except pynvml.NVMLError:
            continue  # not supported, or the GPU is lost: what we have is all we know
    return tuple(GpuProcess(pid, _PROC.executable(pid)) for pid in pids)


def nvml_process_lookup(handles: Mapping[str, Any]) -> CachedProcessLookup:
    return CachedProcessLookup(handles, _nvml_processes)
