"""A backend's processes per GPU for health events when attribution is off, cached briefly.

Each backend (NVML, amdsmi) knows only how to list one GPU's processes; the caching around it
is the same for all: answers are kept for ``TTL_S`` per GPU, so an event storm costs one query
per GPU per second, and a failed query answers with the last list known (the GPU may be lost
or busy). Containers and pods come from the workload resolver through the same seam
(:class:`gpu_otel_agent.model.workload.WorkloadLookup`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from gpu_otel_agent.model.workload import GpuProcess

# The processes on the GPU behind a handle, or None when the query failed.
ProcessQuery = Callable[[Any], "tuple[GpuProcess, ...] | None"]


class CachedProcessLookup:
    """A :class:`~gpu_otel_agent.model.workload.WorkloadLookup` over one backend's GPU processes."""

    TTL_S = 1.0

    def __init__(self, handles: Mapping[str, Any], query: ProcessQuery) -> None:
        self._handles = dict(handles)
        self._query = query
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, tuple[GpuProcess, ...]]] = {}

    def processes_on(self, uuid: str) -> tuple[GpuProcess, ...]:
        handle = self._handles.get(uuid)
        if handle is None:
            return ()
        now = time.monotonic()
        with self._lock:
            cached = self._cache.get(uuid)
        if cached is not None and now - cached[0] < self.TTL_S:
            return cached[1]
        found = self._query(handle)
        if found is None:
            return cached[1] if cached is not None else ()  # lost or busy: the last we knew
        with self._lock:
            self._cache[uuid] = (now, found)
        return found
