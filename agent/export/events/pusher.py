"""Pushes health events to the collector as soon as they happen; never loses one it observed.

Write-ahead: a writer takes what has arrived (everything since its last write: group commit,
one fsync per batch) and makes it durable in the spool; a sender offers the spool's segments to
the collector, oldest first, and deletes each only when the collector accepts it. The two run
on their own threads, so a send stuck in the transport's retries never holds an event in
memory: ``kill -9`` at any moment loses nothing, and a restart sends what is on disk again,
with the same ``log.record.uid``. The batch just written is kept in memory for its send (no
read back from disk on the healthy path), within ``HOT_EVENTS``.

While the collector is away, every ``retry`` seconds (backing off to ``MAX_RETRY_S``) the
oldest segment is offered again. Events the spool cannot take (full, read-only, disk full, no
spool) are still sent live from memory; refused, they wait in the bounded memory queue — or,
when the spool is merely full, are dropped and counted, keeping the first events of an
incident. Disk I/O and sending never run on the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from gpu_otel_agent.export.events.senders import EventSender
from gpu_otel_agent.export.events.spool import Spool
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.sampling.worker import DeviceWorker

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_BATCH = 512
MAX_PENDING = 100_000  # events waiting in memory; storm control keeps far below this
MAX_RETRY_S = 5.0
HOT_EVENTS = 4096  # written events also kept in memory for their send (beyond: read back)


@dataclass
class EventExportStats:
    sent: int = 0  # events the collector accepted (spooled ones included once re-sent)
    send_failures: int = 0  # batches it did not accept
    dropped: int = 0  # events lost in memory (pending overflow); spool drops are in Spool


class EventPusher:
    def __init__(self, sender: EventSender, spool: Spool, retry: float = 1.0) -> None:
        self._sender = sender
        self._spool = spool
        self._retry = retry
        self._pending: deque[HealthEvent] = deque()  # not yet written
        self._volatile: deque[HealthEvent] = deque()  # the spool could not take them
        self._hot: dict[int, list[HealthEvent]] = {}  # segment -> its events, just written
        self._hot_events = 0
        self._mutex = threading.Lock()  # _volatile and _hot: the two threads share them
        self._written = asyncio.Event()
        self._arrived = asyncio.Event()
        # Daemon threads: a send stuck on the network must not hold up the process's exit.
        self._writer = DeviceWorker("otlp-events-wal")
        self._thread = DeviceWorker("otlp-events")
        self._failing = False
        self.stats = EventExportStats()

    def submit(self, event: HealthEvent) -> None:
        if len(self._pending) >= MAX_PENDING:
            self.stats.dropped += 1
            return
        self._pending.append(event)
        self._arrived.set()

    @staticmethod
    async def _on(worker: DeviceWorker, fn: Callable[[], T]) -> T:
        # Shielded: a job handed over (a spool write, a send) runs to its end even if this
        # task is cancelled at shutdown; cancelling it would drop the events it holds.
        return await asyncio.shield(asyncio.wrap_future(worker.submit(fn)))

    async def run(self) -> None:
        await self._on(self._writer, self._spool.open)
        await asyncio.gather(self._write_loop(), self._send_loop())

    # -- writing ahead -------------------------------------------------------------------

    async def _write_loop(self) -> None:
        while True:
            if not self._pending:
                self._arrived.clear()
                await self._arrived.wait()
            batch = self._take(self._pending)
            await self._on(self._writer, functools.partial(self._write, batch))
            self._written.set()

    def _write(self, batch: list[HealthEvent]) -> None:
        """On the writer's thread: make ``batch`` durable; what the spool cannot take goes to
        the volatile queue (sent live), or is dropped when the spool is full and the collector
        away. Done here, not after the await, so a shutdown in between cannot lose it."""
        written = self._spool.append(batch)
        with self._mutex:
            if written.segment is not None and self._hot_events < HOT_EVENTS:
                self._hot[written.segment] = batch[:written.kept]
                self._hot_events += written.kept
            rest = batch[written.kept:]
            if rest and written.full and self._failing:
                self._spool.stats.dropped += len(rest)
            elif rest:
                room = max(0, MAX_PENDING - len(self._volatile))
                self.stats.dropped += max(0, len(rest) - room)
                self._volatile.extend(rest[:room])

    @staticmethod
    def _take(queue: deque[HealthEvent]) -> list[HealthEvent]:
        return [queue.popleft() for _ in range(min(MAX_BATCH, len(queue)))]

    # -- sending -------------------------------------------------------------------------

    async def _send_loop(self) -> None:
        backoff = self._retry
        while True:
            if not self._spool.stats.records and not self._volatile:
                self._written.clear()
                await self._written.wait()
            if self._failing:
                await asyncio.sleep(backoff)
            ok = await self._on(self._thread, self._send_next)
            self._set_failing(not ok)
            backoff = self._retry if ok else min(backoff * 2, MAX_RETRY_S)

    def _send_next(self) -> bool:
        """On the sender's thread: offer the oldest segment (else the oldest volatile events);
        delete the segment once accepted."""
        if self._spool.stats.records:
            number, events = self._oldest()
            if number is None:
                return True
            ok = self._send(events)
            if ok:
                self._spool.remove(number)
            else:
                self._spool.mark_resent(number)
            return ok
        with self._mutex:
            batch = self._take(self._volatile)
        if not batch:
            return True
        ok = self._send(batch)
        if not ok:
            with self._mutex:
                self._volatile.extendleft(reversed(batch))
        return ok

    def _oldest(self) -> tuple[int | None, list[HealthEvent]]:
        with self._mutex:
            if self._hot:
                number = min(self._hot)
                if self._spool.oldest_number() == number:
                    events = self._hot.pop(number)
                    self._hot_events -= len(events)
                    return number, events
        oldest = self._spool.oldest()
        if oldest is None:
            return None, []
        with self._mutex:
            self._hot_events -= len(self._hot.pop(oldest[0], []))
        return oldest

    def _send(self, batch: list[HealthEvent]) -> bool:
        try:
            ok = self._sender.send(batch)
        except Exception:  # a bug in encoding must cost a retry, not the events
            log.exception("event export raised")
            ok = False
        if ok:
            self.stats.sent += len(batch)
        else:
            self.stats.send_failures += 1
        return ok

    def _set_failing(self, failing: bool) -> None:
        if failing and not self._failing:
            where = ("they wait in the spool" if self._spool.usable
                     else "keeping them in memory")
            log.warning("event export failed; %s until the collector accepts them again", where)
        elif not failing and self._failing:
            log.info("event export recovered; re-sending spooled events")
        self._failing = failing

    # -- shutdown ------------------------------------------------------------------------

    def close(self, leftovers: list[HealthEvent], timeout: float) -> None:
        """After ``run`` was cancelled: everything not accepted yet goes to disk, then, when
        the collector is healthy, one quick attempt (within ``timeout``) to send it; what is
        not accepted stays on disk for the next start. A send in flight when ``run`` was
        cancelled may be repeated then: a duplicate (same id) is better than a loss."""
        pending = [*self._pending, *leftovers]
        self._pending.clear()
        done = self._writer.submit(functools.partial(self._close_write, pending))
        try:
            done.result(timeout=timeout)
        except Exception:
            log.warning("final event spool write did not finish")
        if not self._failing and (self._spool.stats.records or self._volatile):
            future = self._thread.submit(self._drain)
            try:
                future.result(timeout=timeout)
            except Exception:  # timeout or failure: what was not accepted stays on disk
                log.warning("final event export did not finish; %d event(s) wait in the "
                            "spool", self._spool.stats.records)
        lost = len(self._volatile)
        if lost:
            self._spool.stats.dropped += lost
            log.error("%d health event(s) not accepted by the collector are lost at shutdown: "
                      "the spool could not take them", lost)
        self._writer.stop()
        self._thread.stop()
        self._spool.close()
        try:
            self._sender.shutdown()
        except Exception:
            log.debug("event sender shutdown failed", exc_info=True)

    def _close_write(self, pending: list[HealthEvent]) -> None:
        for start in range(0, len(pending), MAX_BATCH):
            self._write(pending[start:start + MAX_BATCH])

    def _drain(self) -> None:
        while self._spool.stats.records or self._volatile:
            if not self._send_next():
                return
