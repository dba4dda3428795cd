"""Pushes the snapshot to the metric exporter on the export interval.

The exporter blocks (network I/O, retries), so it runs on a thread of its own; the event loop
only encodes the snapshot and waits. An export that fails is logged and the next interval
carries the then-current values; the final export on shutdown is bounded in time.

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
from gpu_otel_agent.model.snapshot import SnapshotStore
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
        self._failing = False
        self._in_flight: asyncio.Future[bool] | None = None

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
            await self.export_once(timeout=max(interval, 1.0))

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
        await self.export_once(timeout=max(interval, 1.0))
        return started

    async def export_once(self, timeout: float) -> None:
        """Start an export and wait up to ``timeout`` for it.

        The exporter may retry for longer than we wait; its outcome is recorded whenever it
        ends (``_record``), so a late success still counts and still ends an outage.
        """
        if self._in_flight is not None and not self._in_flight.done():
            # The previous export is still retrying: don't queue stale data behind it.
            self.stats.skipped += 1
            return
        with Stage(SNAPSHOT):
            snapshot = self._store.current(time.time_ns())
        if not snapshot.devices:
            return
        loop = asyncio.get_running_loop()
        # Encoding happens on the export thread too: the loop only takes the snapshot.
        # ``LoopWorker`` and ``settled`` instead of a pool's ``run_in_executor``,
        # ``asyncio.timeout`` and ``asyncio.wait``: the same hand-off and wait in 34k instead
        # of 179k instructions per export (callgrind; issue 41).
        in_flight = self._thread.submit(loop, lambda: self._exporter.export(snapshot, timeout))
        in_flight.add_done_callback(self._record)
        self._in_flight = in_flight
        await settled(loop, in_flight, timeout)

    def _record(self, outcome: asyncio.Future[bool]) -> None:
        self.stats.exports += 1
        ok = False
        if outcome.cancelled():
            pass
        elif (error := outcome.exception()) is not None:
            # A bug in encoding must cost one export, not all of them.
            log.error("metric export raised", exc_info=error)
        else:
            ok = outcome.result()
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
            if self._in_flight is not None and not self._in_flight.done():
                # Let a retrying export finish (it may be carrying the latest values).
                await settled(asyncio.get_running_loop(), self._in_flight, timeout * 0.4)
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
