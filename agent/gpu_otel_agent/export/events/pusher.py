"""Pushes health events to the collector as soon as they happen; never loses one it observed.

Write-ahead, in three threads that never wait for each other: a writer puts what has arrived
into a spool segment at once (from then on a ``kill -9`` cannot lose it); a syncer fsyncs
every segment written since its last sync in one go (group commit: a slow fsync never delays
the next write, and a burst shares a few fsyncs); a sender offers the durable segments to the
collector, oldest first, and deletes each only when the collector has accepted it. So a send
stuck in the transport's retries never holds an event in memory, an event is durable before
its first send, and a restart sends what is on disk again, with the same ``log.record.uid``.
They are plain threads woken directly (no event-loop hop: the write-ahead adds its fsync to an
event's latency and little else), and the batch just written is kept in memory for its send,
within ``HOT_EVENTS``, so the healthy path never reads back from disk.

While the collector is away, every ``retry`` seconds (backing off to ``MAX_RETRY_S``) the
oldest segment is offered again. Events the spool cannot take (full, read-only, disk full, no
spool) are still sent live from memory; refused, they wait in the bounded memory queue — or,
when the spool is merely full, are dropped and counted, keeping the first events of an
incident. Nothing here blocks the event loop: ``submit`` only queues.

A batch the collector refuses for good (gRPC INVALID_ARGUMENT, HTTP 400: ``Attempt.
bad_content``) is split in halves until the one event it will not take is found; that event
is quarantined (``dead_letter``: kept beside the spool, logged, counted per code) and the rest
go on. So one record the collector cannot take never holds back the ones after it, across
restarts too. An event whose encoding raises is treated the same way. The three threads are
supervised (``threads.supervised``): a bug that ends one is logged, counted and restarted.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from google.protobuf.message import EncodeError

from gpu_otel_agent.export.events.dead_letter import DeadLetters
from gpu_otel_agent.export.events.senders import EventSender
from gpu_otel_agent.export.events.spool import Spool
from gpu_otel_agent.export.otlp.retry import Attempt
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.threads.named import NamedThread
from gpu_otel_agent.threads.supervised import SupervisedThread

log = logging.getLogger(__name__)
MAX_BATCH = 512
MAX_PENDING = 100_000  # events waiting in memory; storm control keeps far below this
MAX_RETRY_S = 5.0
HOT_EVENTS = 4096  # written events also kept in memory for their send (beyond: read back)
# What encoding raises for a value it cannot take (protobuf's EncodeError is a ValueError's
# sibling under Exception, so it is named too).
UNENCODABLE = (ValueError, OverflowError, UnicodeError, EncodeError)


@dataclass
class EventExportStats:
    sent: int = 0  # events the collector accepted (spooled ones included once re-sent)
    send_failures: int = 0  # batches it did not accept
    dropped: int = 0  # events lost in memory (pending overflow); spool drops are in Spool


class EventPusher:
    def __init__(self, sender: EventSender, spool: Spool, retry: float = 1.0,
                 dead_letters: DeadLetters | None = None, *,
                 on_open: Callable[[], None] | None = None,
                 on_written: Callable[[list[str]], None] | None = None) -> None:
        self._sender = sender
        self._spool = spool
        self.dead_letters = (dead_letters if dead_letters is not None
                             else DeadLetters(spool))
        self._retry = retry
        self._lock = threading.Lock()  # guards the three queues below
        self._pending: deque[HealthEvent] = deque()  # not yet written
        self._volatile: deque[HealthEvent] = deque()  # the spool could not write them
        self._overflow: deque[HealthEvent] = deque()  # the spool was full: live or dropped
        self._hot: dict[int, list[HealthEvent]] = {}  # segment -> its events, just written
        self._hot_events = 0
        self._arrived = threading.Condition(self._lock)  # pending has events
        self._to_sync = threading.Condition(self._lock)  # a segment was written
        self._written = threading.Condition(self._lock)  # durable segments or volatile events
        self._writing = False  # a batch is being written (close waits for it)
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._failing = False
        self.stats = EventExportStats()
        # Told the ids of events once written ahead (the storm journal closes their windows).
        self._on_written = on_written
        # Called on the event loop once the spool is open (or found unusable).
        self._on_open = on_open

    def submit(self, event: HealthEvent) -> None:
        with self._lock:
            if len(self._pending) >= MAX_PENDING:
                self.stats.dropped += 1
                return
            self._pending.append(event)
            self._arrived.notify()

    async def run(self) -> None:
        """Open the spool, start the writer, syncer and sender, and wait to be cancelled."""
        await asyncio.to_thread(self._spool.open)
        if self._on_open is not None:
            self._on_open()
        # Daemon threads: a send stuck on the network must not hold up the process's exit.
        for name, target in (("otlp-events-wal", self._write_loop),
                             ("otlp-events-sync", self._sync_loop),
                             ("otlp-events", self._send_loop)):
            thread = SupervisedThread(target, name, stopping=self._stopping)
            thread.start()
            self._threads.append(thread)
        await asyncio.Event().wait()

    # -- writing ahead -------------------------------------------------------------------

    def _write_loop(self) -> None:
        while True:
            with self._lock:
                while not self._pending and not self._stopping.is_set():
                    self._arrived.wait()
                if self._stopping.is_set():
                    return
                batch = self._take(self._pending)
                self._writing = True
            try:
                self._write(batch)
            finally:
                with self._lock:
                    self._writing = False
                    self._arrived.notify_all()  # close() may wait for this write

    def _write(self, batch: list[HealthEvent]) -> None:
        """Write ``batch`` ahead; what the spool cannot take goes to the volatile queue (sent
        live), or is dropped when the spool is full and the collector away."""
        written = self._spool.append(batch)
        rest = batch[written.kept:]
        if written.kept and self._on_written is not None:
            self._on_written([event.uid for event in batch[:written.kept]])
        with self._lock:
            if written.segment is not None and self._hot_events < HOT_EVENTS:
                self._hot[written.segment] = batch[:written.kept]
                self._hot_events += written.kept
            if rest and written.full:
                # The spool's bound is the operator's: beyond it, events go out live while
                # the collector takes them, and are dropped (counted) when it does not.
                if self._failing:
                    self._spool.stats.dropped += len(rest)
                else:
                    self._overflow.extend(rest)
            elif rest:
                room = max(0, MAX_PENDING - len(self._volatile))
                self.stats.dropped += max(0, len(rest) - room)
                self._volatile.extend(rest[:room])
            if written.segment is not None:
                self._to_sync.notify()
            if rest:
                self._written.notify()

    def _sync_loop(self) -> None:
        while True:
            with self._lock:
                while not self._spool.unsynced and not self._stopping.is_set():
                    self._to_sync.wait()
            if self._stopping.is_set():
                return
            try:
                self._spool.sync()
            finally:
                with self._lock:
                    self._written.notify()

    @staticmethod
    def _take(queue: deque[HealthEvent]) -> list[HealthEvent]:
        return [queue.popleft() for _ in range(min(MAX_BATCH, len(queue)))]

    # -- sending -------------------------------------------------------------------------

    def _send_loop(self) -> None:
        backoff = self._retry
        while True:
            with self._lock:
                while not self._has_work() and not self._stopping.is_set():
                    self._written.wait()
            if self._stopping.is_set():
                return
            ok = self._send_next()
            self._set_failing(not ok)
            if not ok:
                with self._lock:
                    self._spool.stats.dropped += len(self._overflow)
                    self._overflow.clear()
            backoff = self._retry if ok else min(backoff * 2, MAX_RETRY_S)
            if not ok and self._stopping.wait(backoff):
                return

    def _has_work(self) -> bool:
        # Events the spool could not take wait for the older ones being synced: order holds.
        return self._spool.sendable or (bool(self._volatile or self._overflow)
                                        and not self._spool.unsynced)

    def _send_next(self) -> bool:
        """Offer the oldest segment (else the events the spool could not take); delete the
        segment once accepted (or its refused events quarantined)."""
        if self._spool.sendable:
            number, events = self._oldest()
            if number is None:
                return True
            ok = self._deliver(events)
            if ok:
                self._spool.remove(number)
            else:
                self._spool.mark_resent(number)
            return ok
        with self._lock:
            queue = self._overflow if self._overflow else self._volatile
            batch = self._take(queue)
        if not batch:
            return True
        ok = self._deliver(batch)
        if not ok:
            with self._lock:
                queue.extendleft(reversed(batch))
        return ok

    def _deliver(self, batch: list[HealthEvent]) -> bool:
        """Send ``batch``; when the collector refuses it for good, split it until the events
        it will not take are found and quarantined. True once every event was accepted or
        quarantined; False (all to be offered again) when the collector is away."""
        outcome = self._send(batch)
        if outcome.ok:
            return True
        if not outcome.bad_content:
            return False
        if len(batch) == 1:
            self.dead_letters.quarantine(batch[0], outcome.code)
            return True
        middle = len(batch) // 2
        # Halves in order; should the collector go away meanwhile, the whole batch is offered
        # again later (what was accepted comes twice, with the same ids).
        return self._deliver(batch[:middle]) and self._deliver(batch[middle:])

    def _oldest(self) -> tuple[int | None, list[HealthEvent]]:
        with self._lock:
            first = self._spool.oldest_number()
            # Segments older than the spool's oldest went with a removed directory (the
            # spool recreated it): their copies here are dropped, not offered.
            for stale in [n for n in self._hot if first is not None and n < first]:
                self._hot_events -= len(self._hot.pop(stale))
            if self._hot:
                number = min(self._hot)
                if first == number:
                    events = self._hot.pop(number)
                    self._hot_events -= len(events)
                    return number, events
        oldest = self._spool.oldest()
        if oldest is None:
            return None, []
        with self._lock:
            self._hot_events -= len(self._hot.pop(oldest[0], []))
        return oldest

    def _send(self, batch: list[HealthEvent]) -> Attempt:
        try:
            outcome = self._sender.send(batch)
        except Exception as error:
            # A value the encoder cannot take (out of range, not encodable): the same events
            # would raise again on every try, so they are found (split) and quarantined like
            # events the collector refuses, and the rest go on. Any other exception is a bug
            # of the sender's, not the data's: the events wait and are offered again.
            log.exception("event export raised")
            outcome = Attempt(ok=False, retryable=not isinstance(error, UNENCODABLE),
                              code=type(error).__name__,
                              bad_content=isinstance(error, UNENCODABLE))
        if outcome.ok:
            self.stats.sent += len(batch)
        else:
            self.stats.send_failures += 1
        return outcome

    def _set_failing(self, failing: bool) -> None:
        if failing and not self._failing:
            # Said after shutdown closed the spool too (a send in flight failing then): what
            # was written waits in it for the next start.
            where = ("they wait in the spool" if self._spool.keeps
                     else "keeping them in memory (no usable spool)")
            log.warning("event export failed; %s until the collector accepts them again", where)
        elif not failing and self._failing:
            log.info("event export recovered; re-sending spooled events")
        self._failing = failing

    # -- shutdown ------------------------------------------------------------------------

    def close(self, leftovers: list[HealthEvent], timeout: float) -> None:
        """After ``run`` was cancelled: everything not accepted yet goes to disk, then, when
        the collector is healthy, one quick attempt (within ``timeout``) to send it; what is
        not accepted stays on disk for the next start. A send in flight may be repeated then:
        a duplicate (same id) is better than a loss."""
        deadline = time.monotonic() + timeout
        self._stopping.set()
        with self._lock:
            self._arrived.notify_all()
            self._to_sync.notify_all()
            self._written.notify_all()
            while self._writing and time.monotonic() < deadline:
                self._arrived.wait(deadline - time.monotonic())  # that batch lands first
            pending = [*self._pending, *leftovers]
            self._pending.clear()
        for start in range(0, len(pending), MAX_BATCH):
            self._write(pending[start:start + MAX_BATCH])
        self._spool.sync()
        for thread in self._threads:  # the sender may be in a send: let it end, if it will
            thread.join(max(0.0, deadline - time.monotonic()))
        if not self._failing and self._has_work():
            self._run_for(self._drain, deadline - time.monotonic())
        with self._lock:
            lost = len(self._volatile) + len(self._overflow)
        if lost:
            self._spool.stats.dropped += lost
            log.error("%d health event(s) not accepted by the collector are lost at shutdown: "
                      "the spool could not take them", lost)
        self._spool.close()
        try:
            self._sender.shutdown()
        except Exception:
            log.debug("event sender shutdown failed", exc_info=True)

    @staticmethod
    def _run_for(job: Callable[[], None], seconds: float) -> None:
        """``job`` on a daemon thread, waited for at most ``seconds``: a send that hangs
        must not hold up the exit (what it did not get accepted stays on disk)."""
        thread = NamedThread(target=job, name="otlp-events-final", daemon=True)
        thread.start()
        thread.join(max(0.0, seconds))
        if thread.is_alive():
            log.warning("final event export did not finish; what was not accepted waits in "
                        "the spool for the next start")

    def _drain(self) -> None:
        while self._has_work():
            if not self._send_next():
                return
