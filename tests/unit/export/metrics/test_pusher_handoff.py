"""The metric pusher hands each export to its thread and waits for it (its ``LoopWorker`` +
``settled``, issue 41) as it did with ``run_in_executor`` and ``asyncio.wait``: a result
is recorded, a wait ends at its timeout without cancelling the export, whose late outcome
still counts, an interval meeting an export still in flight is skipped, and an exporter
that raises costs one export; the outcome of an export on the interval is recorded on the
export thread, without waking the loop."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from gpu_otel_agent.config.holder import ConfigHolder
from gpu_otel_agent.config.load import Overrides, load
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


def _pusher(exporter: _Exporter, export_interval: float | None = None) -> MetricPusher:
    store = SnapshotStore()
    store.put(DeviceSnapshot(DeviceIdentity("GPU-0", 0, "nvidia", "GPU", "bus"),
                             HealthState.OK, 1))
    config = load(None, Overrides(export_interval=export_interval), environ={})
    return MetricPusher(exporter, store, ConfigHolder(config), 1)


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


class _HandBacksCounted(asyncio.SelectorEventLoop):
    """A loop that notes which thread hands it each callback from outside."""

    def __init__(self) -> None:
        super().__init__()
        self.handed_by: list[str] = []

    def call_soon_threadsafe(self, *args: Any, **kwargs: Any) -> asyncio.Handle:
        self.handed_by.append(threading.current_thread().name)
        return super().call_soon_threadsafe(*args, **kwargs)


def test_the_loop_is_not_woken_to_learn_each_export_outcome() -> None:
    """The export thread records an export's outcome itself: on the interval, the loop only
    hands the snapshot over (a loop woken once more per export to learn an outcome it does
    not need was a wake-up a cycle, issue 41)."""
    exporter = _Exporter(*([True] * 6))
    pusher = _pusher(exporter, export_interval=0.1)

    async def main() -> None:
        task = asyncio.create_task(pusher.run())
        await until(lambda: pusher.stats.exports >= 5, what="exports on the interval")
        task.cancel()

    loop = _HandBacksCounted()
    try:
        loop.run_until_complete(main())
        # The first export is awaited (the agent logs when it is done); none after it.
        assert loop.handed_by.count("otlp-export_0") <= 1, loop.handed_by
        assert pusher.stats.failures == 0 and len(exporter.threads) >= 5
        loop.run_until_complete(pusher.close(5.0))
    finally:
        loop.close()
