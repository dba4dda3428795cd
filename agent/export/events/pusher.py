"""Pushes health events to the collector as soon as they happen; never loses one it observed.

Write-ahead: each batch (what arrived while the previous one was written and sent) is made
durable in the spool — one fsync for the batch — before it is sent, and its segment is deleted
only when the collector accepts it, so ``kill -9`` at any moment loses nothing: a restart sends
what is on disk again, with the same ``log.record.uid``. While the collector is away, every
``retry`` seconds (backing off to ``MAX_RETRY_S``) the oldest segment is offered again; once
accepted, the spool drains oldest first before anything newer is sent (newer events are
written first all the same). Events the spool cannot take (full, read-only, disk full, no
spool) are still sent live; refused, they wait in the bounded memory queue — or, when the
spool is merely full, are dropped and counted, keeping the first events of an incident.
Sending and disk I/O run on the pusher's own thread, never on the event loop.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from gpu_otel_agent.export.events.senders import EventSender
from gpu_otel_agent.export.events.spool import Spool, Written
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.sampling.worker import DeviceWorker

log = logging.getLogger(__name__)
T = TypeVar("T")
MAX_BATCH = 512
MAX_PENDING = 100_000  # events waiting in memory; storm control keeps far below this
MAX_RETRY_S = 5.0


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
        self._pending: deque[HealthEvent] = deque()
        self._wake = asyncio.Event()
        # A daemon thread: a send stuck on the network must not hold up the process's exit.
        self._thread = DeviceWorker("otlp-events")
        self._failing = False
        self._in_flight: list[HealthEvent] = []
        self.stats = EventExportStats()

    def submit(self, event: HealthEvent) -> None:
        if len(self._pending) >= MAX_PENDING:
            self.stats.dropped += 1
            return
        self._pending.append(event)
        self._wake.set()

    async def _on_thread(self, fn: Callable[[], T]) -> T:
        # Shielded: a job handed over (a spool write, a send) runs to its end even if this
        # task is cancelled at shutdown; cancelling it would drop the events it holds.
        return await asyncio.shield(asyncio.wrap_future(self._thread.submit(fn)))

    async def run(self) -> None:
        await self._on_thread(self._spool.open)
        backoff = self._retry
        while True:
            if not self._pending and not self._spool.stats.records:
                self._wake.clear()
                await self._wake.wait()
            if self._failing or self._spool.stats.records:
                # A backlog: what is new goes to disk first, then the oldest goes out first.
                if self._spool.usable:
                    await self._spill()
                if self._failing:
                    await asyncio.sleep(backoff)
                ok = await (self._send_spooled() if self._spool.stats.records
                            else self._send_pending())
                backoff = self._retry if ok else min(backoff * 2, MAX_RETRY_S)
                continue
            await self._send_pending()

    def _take(self) -> list[HealthEvent]:
        return [self._pending.popleft() for _ in range(min(MAX_BATCH, len(self._pending)))]

    async def _send_pending(self) -> bool:
        """Write the oldest waiting batch ahead, send it, delete it once accepted: one job on
        the pusher's thread, so the write costs one fsync and no extra hop."""
        batch = self._take()
        if not batch:
            self._set_failing(False)
            return True
        self._in_flight = batch

        def attempt() -> tuple[bool, Written]:
            written = self._spool.append(batch)
            self._in_flight = batch[written.kept:]  # what close() must still keep
            ok = self._send(batch)
            if written.segment is not None:
                if ok:
                    self._spool.remove(written.segment)
                else:
                    self._spool.mark_resent(written.segment)
            return ok, written

        ok, written = await self._on_thread(attempt)
        self._in_flight = []
        if not ok:
            self._keep(batch[written.kept:], written.full)
        self._set_failing(not ok)
        return ok

    def _keep(self, events: list[HealthEvent], full: bool) -> None:
        """Refused events the spool could not take: dropped when it is full (it keeps the
        oldest), else back to the head of the queue (memory, bounded by MAX_PENDING)."""
        if not events:
            return
        if full:
            self._spool.stats.dropped += len(events)
            return
        room = max(0, MAX_PENDING - len(self._pending))
        self.stats.dropped += max(0, len(events) - room)
        self._pending.extendleft(reversed(events[:room]))

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

    def _send_in_batches(self, events: list[HealthEvent], accepted: list[int]) -> None:
        """Send in requests of MAX_BATCH (one request could pass gRPC's size limit), stopping
        at the first refusal; ``accepted[0]`` counts the events the collector took."""
        for start in range(0, len(events), MAX_BATCH):
            batch = events[start:start + MAX_BATCH]
            if not self._send(batch):
                return
            accepted[0] = start + len(batch)

    async def _spill(self) -> None:
        """Everything waiting goes to disk, one segment per MAX_BATCH."""
        while self._pending:
            batch = self._take()
            written = await self._on_thread(functools.partial(self._spool.append, batch))
            rest = batch[written.kept:]
            if rest:
                if written.full and self._failing:
                    self._keep(rest, full=True)
                    continue
                self._pending.extendleft(reversed(rest))  # sent live later, or kept in memory
                return

    async def _send_spooled(self) -> bool:
        def attempt() -> bool:
            oldest = self._spool.oldest()
            if oldest is None:
                return True
            number, events = oldest
            if not self._send(events):
                self._spool.mark_resent(number)
                return False
            self._spool.remove(number)
            return True

        ok = await self._on_thread(attempt)
        self._set_failing(not ok)
        return ok

    def _set_failing(self, failing: bool) -> None:
        if failing and not self._failing:
            where = "spooling them to disk" if self._spool.usable else "keeping them in memory"
            log.warning("event export failed; %s until the collector accepts them again", where)
        elif not failing and self._failing:
            log.info("event export recovered; re-sending spooled events")
        self._failing = failing

    def close(self, leftovers: list[HealthEvent], timeout: float) -> None:
        """After ``run`` was cancelled: keep on disk what the collector has not accepted.

        One quick attempt to send when the collector is healthy; otherwise (or if that fails
        within ``timeout``) everything pending goes to the spool. A batch still in flight is
        spooled too: a duplicate is better than a loss.
        """
        # A batch in flight is on disk already but for what the spool could not take.
        in_flight = self._in_flight
        pending = [*in_flight, *self._pending, *leftovers]
        self._pending.clear()
        if pending and not self._failing and not in_flight:
            accepted = [0]  # events the collector took, in order; read after the wait
            future = self._thread.submit(
                functools.partial(self._send_in_batches, pending, accepted))
            try:
                future.result(timeout=timeout)
            except Exception:  # timeout or failure: what was not accepted stays on disk
                log.warning("final event export did not finish; spooling %d event(s)",
                            len(pending) - accepted[0])
            pending = pending[accepted[0]:]
        if pending:
            written = self._spool.append(pending)
            lost = len(pending) - written.kept
            if lost:
                self._spool.stats.dropped += lost
                log.error("%d health event(s) not accepted by the collector are lost at "
                          "shutdown: the spool %s", lost,
                          "is full" if written.full else "cannot take them")
        self._thread.stop()
        self._spool.close()
        try:
            self._sender.shutdown()
        except Exception:
            log.debug("event sender shutdown failed", exc_info=True)
