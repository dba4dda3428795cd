"""Wires the health pipeline: vendor event sources -> engine -> event pusher (+ spool).

Sources run on their own threads and hand batches to the loop with ``call_soon_threadsafe``;
the samplers report to the engine directly (it is their ``DeviceObserver``); the engine's view
of each GPU goes to the agent's health board, which publishes the GPU's health.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Hashable, Iterable, Sequence
from pathlib import Path
from typing import Any

from gpu_otel_agent.backends.discovery import OpenBackend
from gpu_otel_agent.backends.protocol import (
    DeviceEvent,
    EventCapable,
    EventSource,
    EventSourceOptions,
    WorkloadCapable,
)
from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.export.events.pusher import EventPusher
from gpu_otel_agent.export.events.senders import build_event_sender
from gpu_otel_agent.export.events.spool import Spool
from gpu_otel_agent.gpu_health.debounce import DebounceSettings
from gpu_otel_agent.gpu_health.engine import EngineSettings, HealthEngine
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.sampling_requests import SamplingRequests
from gpu_otel_agent.gpu_health.storm_journal import StormJournal
from gpu_otel_agent.gpu_health.telemetry import HealthTelemetry
from gpu_otel_agent.gpu_health.verdict import HealthBoard
from gpu_otel_agent.local.recent_events import EventRing
from gpu_otel_agent.model.resource import ResourceView
from gpu_otel_agent.model.snapshot import Attributes, Reading, SnapshotStore
from gpu_otel_agent.model.workload import GpuProcess, WorkloadLookup

log = logging.getLogger(__name__)
MIB = 1024 * 1024


class _EachBackend:
    """Every backend's lookup (NVIDIA and AMD on one node): each knows only its own GPUs."""

    def __init__(self, lookups: Sequence[WorkloadLookup]) -> None:
        self._lookups = tuple(lookups)

    def processes_on(self, uuid: str) -> tuple[GpuProcess, ...]:
        return tuple(p for lookup in self._lookups for p in lookup.processes_on(uuid))


def backend_workloads(opened: Sequence[OpenBackend]) -> WorkloadLookup | None:
    """Without attribution: the backends' own process lookups (PIDs and names, no pods)."""
    lookups = [b.backend.workload_lookup() for b in opened
               if isinstance(b.backend, WorkloadCapable)]
    if not lookups:
        return None
    return lookups[0] if len(lookups) == 1 else _EachBackend(lookups)


class HealthRuntime:
    def __init__(
        self,
        config: AgentConfig,
        resource: ResourceView,
        opened: Sequence[OpenBackend],
        store: SnapshotStore,
        workloads: WorkloadLookup | None = None,
        *,
        board: HealthBoard | None = None,
        sampling: SamplingRequests | None = None,
    ) -> None:
        health = config.health
        if workloads is None:
            workloads = backend_workloads(opened)
        spool = Spool(Path(health.spool_path) if health.spool_path else None,
                      int(health.spool_max_mib * MIB))
        self.spool = spool
        # Storm counts go beside the spool (its privacy and ownership), opened with it.
        self.journal = StormJournal(spool.path)
        self.pusher = EventPusher(build_event_sender(config, resource), spool,
                                  on_open=self._open_journal, on_written=self.journal.written)
        # The recent events a local client (gpu-agent top) reads, as they were delivered.
        self.recent = EventRing(config.local_endpoint.recent_events)
        self.engine = HealthEngine(
            [d.identity for b in opened for d in b.devices], self._deliver, store,
            EngineSettings(storm_window=health.storm_window, dedup_window=health.dedup_window,
                           debounce=DebounceSettings(health.degrade_after, health.clear_after)),
            workloads, board=board, sampling=sampling, journal=self.journal,
        )
        options = EventSourceOptions(kmsg=health.kmsg)
        self.sources: list[EventSource] = []
        for backend in opened:
            if isinstance(backend.backend, EventCapable):
                self.sources.extend(backend.backend.event_sources(backend.devices, options))
            else:
                log.info("backend %s has no event source; health comes from polling only",
                         backend.backend.name)

    def _deliver(self, event: HealthEvent) -> None:
        self.recent.append(event)
        self.pusher.submit(event)

    def _open_journal(self) -> None:
        """Once the spool is open: storm counts go to disk beside it (only where the spool
        is usable: the same privacy and ownership), and windows a crash left unsummarised
        are summarised now."""
        if not self.spool.usable:
            return
        self.engine.restore(self.journal.open())

    def start(self) -> list[asyncio.Task[None]]:
        loop = asyncio.get_running_loop()

        def emit(batch: Sequence[DeviceEvent]) -> None:  # on a source's thread
            if not loop.is_closed():
                loop.call_soon_threadsafe(self.engine.on_events, batch)

        for source in self.sources:
            source.start(emit)
        return [asyncio.create_task(self.engine.run(), name="health"),
                asyncio.create_task(self.pusher.run(), name="events-export")]

    def close(self, budget: float) -> None:
        """After the tasks were cancelled: stop the sources, keep every event not sent."""
        for source in self.sources:
            source.stop()
        self.pusher.close(self.engine.drain(), timeout=budget)
        self.engine.close()
        self.journal.close()

    def readings(self) -> tuple[Reading, ...]:
        """Self-telemetry (``gpu_agent.events.*``), read when a snapshot is taken."""
        t = self.telemetry()
        return (
            Reading("gpu_agent.events.produced", t.events),
            Reading("gpu_agent.events.sent", t.sent),
            Reading("gpu_agent.events.suppressed", t.suppressed),
            Reading("gpu_agent.events.duplicates", t.duplicates),
            Reading("gpu_agent.events.dropped", t.dropped),
            Reading("gpu_agent.events.spooled", t.spooled),
            Reading("gpu_agent.events.spool.size", t.spool_bytes),
            Reading("gpu_agent.events.spool.pending", t.spool_records),
            Reading("gpu_agent.events.spool.errors", t.spool_errors),
            *(Reading("gpu_agent.events.quarantined", count, (("error.type", code),))
              for code, count in sorted(self.pusher.dead_letters.stats.quarantined.items())),
        )

    def values(self) -> HealthValues:
        """``readings`` as a self-telemetry ``ValuesSource``: no ``HealthTelemetry`` and
        nine ``Reading``s built every sample to be taken apart again."""
        return HealthValues(self)

    def telemetry(self) -> HealthTelemetry:
        engine, pusher, spool = self.engine.stats, self.pusher.stats, self.spool.stats
        return HealthTelemetry(
            device_events=engine.device_events, events=self.engine.delivered,
            suppressed=engine.suppressed, duplicates=engine.duplicates, sent=pusher.sent,
            send_failures=pusher.send_failures, spooled=spool.spooled, resent=spool.resent,
            dropped=spool.dropped + pusher.dropped, spool_corrupt=spool.corrupt,
            spool_errors=spool.errors, spool_records=spool.records, spool_bytes=spool.bytes,
            spool_writes=spool.writes, spool_write_seconds=spool.write_ns / 1e9,
        )


_HEALTH_KEYS = tuple((metric, ()) for metric in (
    "gpu_agent.events.produced", "gpu_agent.events.sent", "gpu_agent.events.suppressed",
    "gpu_agent.events.duplicates", "gpu_agent.events.dropped", "gpu_agent.events.spooled",
    "gpu_agent.events.spool.size", "gpu_agent.events.spool.pending",
    "gpu_agent.events.spool.errors"))


class HealthValues:
    """The values of ``HealthRuntime.readings``, in its order, read from the counters
    ``HealthRuntime.telemetry`` reads (tests/unit/runtime/test_self_telemetry_sources.py);
    its layout: the quarantine's refusal codes."""

    __slots__ = ("_runtime",)

    def __init__(self, runtime: HealthRuntime) -> None:
        self._runtime = runtime

    def read(self, values: list[float | int]) -> Hashable:
        runtime = self._runtime
        engine, pusher, spool = runtime.engine.stats, runtime.pusher.stats, runtime.spool.stats
        values.extend((runtime.engine.delivered, pusher.sent, engine.suppressed,
                       engine.duplicates, spool.dropped + pusher.dropped, spool.spooled,
                       spool.bytes, spool.records, spool.errors))
        quarantined = sorted(runtime.pusher.dead_letters.stats.quarantined.items())
        if not quarantined:  # nearly always: no generator made for nothing
            return ()
        codes, counts = zip(*quarantined, strict=True)
        values.extend(counts)
        return codes

    def keys(self, token: Any) -> Iterable[tuple[str, Attributes]]:
        return (*_HEALTH_KEYS, *(("gpu_agent.events.quarantined", (("error.type", code),))
                                 for code in token))
