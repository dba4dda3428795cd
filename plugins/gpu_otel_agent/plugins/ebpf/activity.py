"""CUDA activity readings: per process, and per container (or pod, or job) across its
processes, including those that have exited.

A container's counters must not fall when one of its processes exits, so an exiting process's
final counters (handed over by the exit tracepoint) are kept in the container's totals; the
totals are dropped ``retention`` after the container's last traced process is gone. Memory
currently allocated is not carried over: an exited process holds none.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from gpu_otel_agent.model.snapshot import AgentSample, Attributes, Reading
from gpu_otel_agent.model.workload import GpuProcess
from gpu_otel_agent.plugins.ebpf.layout import CudaStats

PROCESS_LAUNCHES = "gpu.process.cuda.kernel_launches"
PROCESS_ALLOCATED = "gpu.process.cuda.memory.allocated"
PROCESS_PEAK = "gpu.process.cuda.memory.peak"
PROCESS_SYNC = "gpu.process.cuda.sync.time"
CONTAINER_LAUNCHES = "gpu.container.cuda.kernel_launches"
CONTAINER_ALLOCATED = "gpu.container.cuda.memory.allocated"
CONTAINER_SYNC = "gpu.container.cuda.sync.time"
OVERFLOW = "gpu.process.cuda.series.overflow"
LAUNCH_TYPE = "gpu.cuda.launch.type"


@dataclass
class _Container:
    start_ns: int
    retired: CudaStats  # of its processes that have exited
    last_live_ns: int


@dataclass(frozen=True)
class _Seen:
    process: GpuProcess
    start_ns: int


def _launches(metric: str, stats: CudaStats, attributes: Attributes) -> tuple[Reading, ...]:
    return (Reading(metric, stats.kernel_launches, (*attributes, (LAUNCH_TYPE, "kernel"))),
            Reading(metric, stats.graph_launches, (*attributes, (LAUNCH_TYPE, "graph"))))


class Activity:
    """``max_process_series`` bounds the per-process series on the node (the busiest, by
    launches, are kept); the processes left out are counted in ``OVERFLOW`` and still count
    towards their container's totals."""

    def __init__(self, retention_ns: int, max_process_series: int = 1024) -> None:
        self._retention_ns = retention_ns
        self._max_process_series = max_process_series
        self._first_ns: int | None = None  # the start of the overflow count
        self._seen: dict[int, _Seen] = {}
        self._containers: dict[Attributes, _Container] = {}

    def retire(self, pid: int, final: CudaStats, now_ns: int) -> None:
        """``pid`` exited (or exec'd) with ``final`` counters: keep them in its container."""
        seen = self._seen.pop(pid, None)
        if seen is None:
            return
        workload = seen.process.workload.attributes()
        if not workload:
            return
        gone = dataclasses.replace(final, allocated=0, peak=0)
        container = self._containers.setdefault(
            workload, _Container(seen.start_ns, CudaStats(), now_ns))
        container.retired = container.retired.plus(gone)
        container.last_live_ns = now_ns

    def samples(self, processes: Mapping[int, GpuProcess], stats: Mapping[int, CudaStats],
                now_ns: int) -> tuple[AgentSample, ...]:
        """One sample per traced process (``stats`` has its counters, zero when it has made no
        call yet) and one per container, each with the start time of its counters."""
        out: list[AgentSample] = []
        live: dict[Attributes, CudaStats] = {}
        listed = sorted((pid for pid in stats if pid in processes), key=lambda pid: (
            -(stats[pid].kernel_launches + stats[pid].graph_launches), pid))
        exported = frozenset(listed[:self._max_process_series])
        for pid in sorted(listed):
            process = processes[pid]
            seen = self._seen.get(pid)
            if seen is None or seen.process != process:
                seen = _Seen(process, now_ns if seen is None else seen.start_ns)
                self._seen[pid] = seen
            counters = stats[pid]
            workload = process.workload.attributes()
            if workload:
                live[workload] = live.get(workload, CudaStats()).plus(counters)
            if pid not in exported:
                continue
            attributes: Attributes = (("process.pid", pid),
                                      ("process.executable.name", process.executable),
                                      *workload)
            out.append(AgentSample((
                *_launches(PROCESS_LAUNCHES, counters, attributes),
                Reading(PROCESS_ALLOCATED, counters.allocated, attributes),
                Reading(PROCESS_PEAK, counters.peak, attributes),
                Reading(PROCESS_SYNC, counters.sync_ns / 1e9, attributes),
            ), seen.start_ns, now_ns))
        for pid in [p for p in self._seen if p not in stats]:
            del self._seen[pid]  # no longer traced (not a GPU process any more)
        if listed:
            if self._first_ns is None:
                self._first_ns = now_ns
            out.append(AgentSample(
                (Reading(OVERFLOW, len(listed) - len(exported)),), self._first_ns, now_ns))
        out.extend(self._container_samples(live, now_ns))
        return tuple(out)

    def _container_samples(self, live: Mapping[Attributes, CudaStats],
                           now_ns: int) -> list[AgentSample]:
        for workload in live:
            container = self._containers.get(workload)
            if container is None:
                self._containers[workload] = _Container(now_ns, CudaStats(), now_ns)
            else:
                container.last_live_ns = now_ns
        expired = [w for w, c in self._containers.items()
                   if w not in live and now_ns - c.last_live_ns > self._retention_ns]
        for workload in expired:
            del self._containers[workload]
        out = []
        for workload, container in sorted(self._containers.items()):
            total = live.get(workload, CudaStats()).plus(container.retired)
            out.append(AgentSample((
                *_launches(CONTAINER_LAUNCHES, total, workload),
                Reading(CONTAINER_ALLOCATED, total.allocated, workload),
                Reading(CONTAINER_SYNC, total.sync_ns / 1e9, workload),
            ), container.start_ns, now_ns))
        return out
