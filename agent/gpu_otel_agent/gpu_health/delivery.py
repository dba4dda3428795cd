"""Hands finished health events to the sink in order, each with the workloads on its GPU.

The process query may block (it calls into the GPU library), so it runs on a daemon thread per
GPU under a short deadline: a GPU that hangs the query, or that is lost or unresponsive, gets
the processes last seen on it, and never holds back the events of another GPU for long.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from dataclasses import dataclass, replace

from gpu_otel_agent.gpu_health.events import EventAttributes, EventValue, HealthEvent
from gpu_otel_agent.model.workload import GpuProcess, WorkloadLookup
from gpu_otel_agent.threads.device_worker import DeviceWorker

LOOKUP_TIMEOUT_S = 0.25


@dataclass(frozen=True)
class Pending:
    event: HealthEvent
    uuid: str
    live_lookup: bool  # False when the GPU cannot answer now: use its last known processes


class _Processes:
    """One GPU's process queries: its thread, the last answer, whether a query still runs."""

    def __init__(self, name: str) -> None:
        self.worker = DeviceWorker(name)
        self.known: tuple[GpuProcess, ...] = ()
        self.busy = False


class Delivery:
    def __init__(
        self, sink: Callable[[HealthEvent], None], workloads: WorkloadLookup | None
    ) -> None:
        self._sink = sink
        self._workloads = workloads
        self._queue: asyncio.Queue[Pending] = asyncio.Queue()
        self._current: Pending | None = None
        self._gpus: dict[str, _Processes] = {}
        # Each GPU's processes of its last event, and their records: the next event of the
        # GPU (most often the same processes) shares the records, not copies of them. The
        # recent-events ring holds 256 events; at 256 processes a GPU, a copy each was
        # 43 KiB an event (8 x 2,048: 0.8 MiB after 18 events, growing with every event).
        self._records: dict[str, dict[GpuProcess, EventAttributes]] = {}
        self.delivered = 0

    def put(self, pending: Pending) -> None:
        self._queue.put_nowait(pending)

    async def run(self) -> None:
        while True:
            pending = await self._queue.get()
            self._current = pending  # cancelled while looking up workloads: drain() keeps it
            event = pending.event
            processes = await self._processes(pending.uuid, pending.live_lookup)
            if processes:
                event = replace(event, workloads=self._records_of(pending.uuid, processes))
            self._current = None
            self.delivered += 1
            self._sink(event)

    async def _processes(self, uuid: str, live: bool) -> tuple[GpuProcess, ...]:
        lookup = self._workloads
        if lookup is None or not uuid:  # no uuid: not a GPU's event (an NVSwitch's)
            return ()
        gpu = self._gpus.get(uuid)
        if gpu is None:
            gpu = self._gpus[uuid] = _Processes(f"workloads-{uuid[-8:]}")
        if not live or gpu.busy:
            return gpu.known  # the GPU cannot answer now (or its last query still hangs)
        gpu.busy = True
        future = asyncio.wrap_future(gpu.worker.submit(lambda: lookup.processes_on(uuid)))

        def done(f: asyncio.Future[tuple[GpuProcess, ...]]) -> None:
            gpu.busy = False
            if not f.cancelled() and f.exception() is None:
                gpu.known = f.result()

        future.add_done_callback(done)
        with contextlib.suppress(Exception):
            async with asyncio.timeout(LOOKUP_TIMEOUT_S):
                return await asyncio.shield(future)
        return gpu.known

    def _records_of(self, uuid: str,
                    processes: tuple[GpuProcess, ...]) -> tuple[EventAttributes, ...]:
        """``workload_records(processes)``, each record shared with the GPU's last event
        where it had the same (equal) process; only this event's processes are kept."""
        held = self._records.get(uuid, {})
        records: dict[GpuProcess, EventAttributes] = {}
        for process in processes:
            record = held.get(process)
            records[process] = record if record is not None else workload_record(process)
        self._records[uuid] = records
        return tuple(map(records.__getitem__, processes))

    def drain(self) -> list[HealthEvent]:
        """At shutdown: every event not delivered yet, in order, without workloads."""
        out = [] if self._current is None else [self._current.event]
        self._current = None
        while not self._queue.empty():
            out.append(self._queue.get_nowait().event)
        self.delivered += len(out)
        return out

    def close(self) -> None:
        for gpu in self._gpus.values():
            gpu.worker.stop()


def workload_records(processes: tuple[GpuProcess, ...]) -> tuple[EventAttributes, ...]:
    """One record's attributes per process: its PID, executable and workload, together."""
    return tuple(map(workload_record, processes))


def workload_record(process: GpuProcess) -> EventAttributes:
    """A process's record: its PID, executable and workload."""
    pairs: list[tuple[str, EventValue]] = [("process.pid", process.pid)]
    if process.executable:
        pairs.append(("process.executable.name", process.executable))
    pairs.extend(process.workload.attributes())
    return tuple(pairs)
