"""Pushes the snapshot to the metric exporter on the export interval.

The exporter blocks (network I/O, retries), so it runs on a thread of its own, which also
encodes and records each export's outcome; the event loop only takes the snapshot. An export
that fails is logged and the next interval carries the then-current values (one still retrying
when the next falls due makes that one skip); the final export on shutdown is bounded in time.

Exports fall due on the interval's grid of the loop clock, the grid the devices' reads fall
due on, and each waits for the reads due with it to be published (``ReadRounds``): an export
carries the readings of that very tick, and it runs in the loop wake-up that published them,
while what it touches is still in the caches, instead of at a phase of its own (measured at 8
GPUs, 1 s: the loop thread's snapshot and self-telemetry stages 270 -> 200 and 205 -> 145 µs a
cycle, and one loop wake-up a cycle fewer; issue 41).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from gpu_otel_agent.config.holder import ConfigHolder, grid_after
from gpu_otel_agent.export.metrics.snapshot_exporters import SnapshotExporter
from gpu_otel_agent.model.snapshot import NodeSnapshot, SnapshotStore
from gpu_otel_agent.threads.costs import SNAPSHOT, Stage
from gpu_otel_agent.threads.handoff import settled
from gpu_otel_agent.threads.loop_worker import LoopWorker

log = logging.getLogger(__name__)
FIRST_EXPORT_POLL_SECONDS = 0.05


class ReadRounds(Protocol):
    """The devices' reads due together (``threads.relay.Relay``)."""

    def after_round(self, callback: Callable[[], None]) -> None:
        """On the loop: call ``callback`` there once the running round's readings are
        published (soon, if none runs), within a bounded delay."""


@dataclass
class ExportStats:
    exports: int = 0  # attempts that ended, successful or not
    failures: int = 0
    skipped: int = 0  # intervals skipped because the previous export was still retrying
    first_export_ns: int | None = None


class MetricPusher:
    def __init__(
        self,
        exporter: SnapshotExporter,
        store: SnapshotStore,
        config: ConfigHolder,
        device_count: int,
        rounds: ReadRounds | None = None,
    ) -> None:
        """``rounds``: what an export due on a tick waits for (None: it exports at once)."""
        self._exporter = exporter
        self._store = store
        self._config = config
        self._device_count = device_count
        self._rounds = rounds
        # The name a one-thread pool gave it (the stage clocks' "otlp-export").
        self._thread = LoopWorker("otlp-export_0")
        self.stats = ExportStats()
        self._failing = False  # written on the export thread
        self._exporting = False  # an export is on the export thread (cleared there)

    async def run(self) -> None:
        loop = asyncio.get_running_loop()
        next_due = await self._first_export()
        while True:
            interval = self._config.current.export_interval
            # Behind (an export that took its whole interval): once at once, then on the grid.
            next_due = max(grid_after(next_due + interval / 2, interval), loop.time())
            if await self._config.sleep_until(loop, next_due):
                next_due = loop.time()  # new interval takes effect now
                continue
            await self._after_reads(loop)
            self._start_export(self._timeout())

    async def _after_reads(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wait for the reads due on this tick to be published (the relay's bound: a hung
        device delays the export by its pass-on deadline at most)."""
        if self._rounds is None:
            return
        # The devices' tasks woken by the same tick are queued ahead: they submit their reads
        # (and join the round) before this looks for it.
        await asyncio.sleep(0)
        published: asyncio.Future[None] = loop.create_future()
        self._rounds.after_round(functools.partial(_resolve, published))
        await published

    async def _first_export(self) -> float:
        """Export as soon as every device has been read once, not a whole interval later."""
        loop = asyncio.get_running_loop()
        interval = self._config.current.export_interval
        deadline = loop.time() + interval
        while loop.time() < deadline and not self._store.covers(self._device_count):
            await asyncio.sleep(FIRST_EXPORT_POLL_SECONDS)
        started = loop.time()
        await self.export_once(timeout=self._timeout())
        return started

    async def export_once(self, timeout: float) -> None:
        """Start an export and wait up to ``timeout`` for it (the first export, the last).

        The exporter may retry for longer than we wait; its outcome is recorded whenever it
        ends (``_export``), so a late success still counts and still ends an outage.
        """
        loop = asyncio.get_running_loop()
        if self._start_export(timeout):
            await self._ended(loop, timeout)

    def _start_export(self, timeout: float) -> bool:
        """Hand the current snapshot to the export thread; False if none went (the previous
        export still retrying, or no device yet).

        The loop does not wait for the outcome: the export thread records it itself, so the
        loop is not woken once more per export to learn it (the next export, an interval
        later, only asks whether this one is still running)."""
        if self._exporting:
            # The previous export is still retrying: don't queue stale data behind it.
            self.stats.skipped += 1
            return False
        with Stage(SNAPSHOT):
            snapshot = self._store.current(time.time_ns())
        if not snapshot.devices:
            return False
        # Encoding happens on the export thread too: the loop only takes the snapshot.
        self._exporting = True
        self._thread.post(functools.partial(self._export, snapshot, timeout))
        return True

    def _timeout(self) -> float:
        return max(self._config.current.export_interval, 1.0)

    async def _ended(self, loop: asyncio.AbstractEventLoop, timeout: float) -> None:
        """Wait up to ``timeout`` for the export thread to finish what it was given."""
        # Queued behind the export, it ends when the export has (``LoopWorker`` and
        # ``settled``: 34k instead of 179k instructions for a pool's hand-off and wait).
        await settled(loop, self._thread.submit(loop, _nothing), timeout)

    def _export(self, snapshot: NodeSnapshot, timeout: float) -> None:
        """On the export thread: export and record the outcome."""
        ok = False
        try:
            ok = self._exporter.export(snapshot, timeout)
        except Exception:  # a bug in encoding must cost one export, not all of them
            log.exception("metric export raised")
        finally:
            self._record(ok)
            self._exporting = False

    def _record(self, ok: bool) -> None:
        self.stats.exports += 1
        if ok:
            if self.stats.first_export_ns is None:
                self.stats.first_export_ns = time.time_ns()
                log.info("first export done")
            if self._failing:
                log.info("metric export recovered")
            self._failing = False
            return
        self.stats.failures += 1
        if not self._failing:  # the transport has logged why, with the endpoint
            log.info("metric export failed; will retry with fresh values every interval")
        self._failing = True

    async def close(self, timeout: float) -> None:
        """Final export, then shut the exporter down, all within ``timeout`` seconds."""
        start = time.monotonic()
        try:
            if self._exporting:
                # Let a retrying export finish (it may be carrying the latest values).
                await self._ended(asyncio.get_running_loop(), timeout * 0.4)
            remaining = timeout - (time.monotonic() - start)
            await self.export_once(timeout=max(remaining * 0.8, 0.1))
        finally:
            remaining = max(timeout - (time.monotonic() - start), 0.1)
            loop = asyncio.get_running_loop()
            shutdown = loop.run_in_executor(None, lambda: self._exporter.shutdown(remaining))
            try:
                async with asyncio.timeout(remaining):
                    await shutdown
            except TimeoutError:
                log.warning("exporter did not shut down within %.1fs", remaining)
            self._thread.shutdown()


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():  # cancelled meanwhile (shutdown)
        waiter.set_result(None)


def _nothing() -> None:
    """A job that only marks its place in the export thread's queue."""
