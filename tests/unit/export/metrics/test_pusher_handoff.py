"""The metric pusher hands each export to its thread and waits for it (its ``LoopWorker`` +
``settled``, issue 41) as it did with ``run_in_executor`` and ``asyncio.wait``: a result
is recorded, a wait ends at its timeout without cancelling the export, whose late outcome
still counts, an interval meeting an export still in flight is skipped, and an exporter
that raises costs one export."""

from __future__ import annotations

import asyncio
import threading

from gpu_otel_agent.config.holder import ConfigHolder
from gpu_otel_agent.config.load import load
from gpu_otel_agent.export.metrics.pusher import MetricPusher
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DeviceSnapshot,
    HealthState,
    NodeSnapshot,
    SnapshotStore,
)
from tests.polling import until


class _Exporter:
    """Answers each export with the next of ``outcomes`` (True, False, or an exception),
    holding it until ``release`` is set when ``hold`` is."""

    def __init__(self, *outcomes: bool | Exception, hold: bool = False) -> None:
        self.outcomes = list(outcomes)
        self.release = threading.Event()
        self.hold = hold
        self.threads: list[str] = []

    def export(self, snapshot: NodeSnapshot, timeout_s: float) -> bool:
        self.threads.append(threading.current_thread().name)
        if self.hold:
            self.release.wait(60)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def shutdown(self, timeout_s: float) -> None:
        self.release.set()


def _pusher(exporter: _Exporter) -> MetricPusher:
    store = SnapshotStore()
    store.put(DeviceSnapshot(DeviceIdentity("GPU-0", 0, "nvidia", "GPU", "bus"),
                             HealthState.OK, 1))
    return MetricPusher(exporter, store, ConfigHolder(load(None, environ={})), 1)


def test_exports_run_on_the_export_thread_and_their_outcomes_are_recorded() -> None:
    async def main() -> None:
        exporter = _Exporter(True, False, RuntimeError("encoder bug"), True)
        pusher = _pusher(exporter)
        for _ in range(4):
            await pusher.export_once(timeout=30.0)
        assert pusher.stats.exports == 4
        assert pusher.stats.failures == 2  # the refused one and the one that raised
        assert pusher.stats.first_export_ns is not None
        assert all(name.startswith("otlp-export") for name in exporter.threads)
        await pusher.close(5.0)

    asyncio.run(main())


def test_a_wait_ends_at_its_timeout_and_the_late_outcome_still_counts() -> None:
    async def main() -> None:
        exporter = _Exporter(True, True, hold=True)
        pusher = _pusher(exporter)
        await pusher.export_once(timeout=0.05)  # returns with the export still running
        assert pusher.stats.exports == 0
        await pusher.export_once(timeout=0.05)  # meets it in flight: skipped
        assert pusher.stats.skipped == 1
        exporter.release.set()
        await until(lambda: pusher.stats.exports == 1, what="the late export recorded")
        assert pusher.stats.failures == 0 and pusher.stats.first_export_ns is not None
        await pusher.close(5.0)

    asyncio.run(main())
