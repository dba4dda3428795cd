"""A bounded on-disk spool for events the collector did not accept.

Each failed batch becomes one segment file (``seg-<n>.jsonl``, written to a temporary name,
fsynced and renamed, so a crash leaves whole segments only). A line is ``<crc32> <json>``.
Segments are re-sent oldest first and deleted once accepted, so the order of events holds
across an outage and across agent restarts.

Bounded: when the spool is full, new events are refused and counted as dropped (like the
collector's own persistent queue), which keeps the first events of an incident — the ones
that say what happened. Damage never stops the agent: an unreadable segment or line is
counted as corrupt and skipped; a spool directory that cannot be used (or is locked by
another running agent) is reported once and the agent runs without a spool.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from gpu_otel_agent.gpu_health.events import HealthEvent

log = logging.getLogger(__name__)
_PREFIX, _SUFFIX = "seg-", ".jsonl"


@dataclass
class SpoolStats:
    spooled: int = 0  # events written to disk
    resent: int = 0  # events taken off the spool after the collector accepted them
    dropped: int = 0  # events refused because the spool was full (or unavailable)
    corrupt: int = 0  # lines or segments that could not be read back
    records: int = 0  # events in the spool now
    bytes: int = 0  # its size now


def _line(event: HealthEvent) -> bytes:
    payload = event.to_json().encode()
    return b"%08x %s\n" % (zlib.crc32(payload), payload)


class Spool:
    def __init__(self, path: Path | None, max_bytes: int) -> None:
        self._path = path
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._segments: dict[int, tuple[int, int]] = {}  # number -> (bytes, records)
        self._next = 0
        self._lock_file: IO[bytes] | None = None
        self._full_logged = False
        self.stats = SpoolStats()

    @property
    def usable(self) -> bool:
        return self._lock_file is not None

    def open(self) -> None:
        """Take the directory (lock it, index its segments). Never raises."""
        if self._path is None:
            log.warning("no event spool configured: events the collector refuses are lost")
            return
        try:
            self._path.mkdir(parents=True, exist_ok=True)
            lock = (self._path / ".lock").open("ab")
        except OSError as error:
            log.error("event spool %s is unusable (%s); running without a spool: events the "
                      "collector refuses are lost", self._path, error.strerror or error)
            return
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            log.error("event spool %s is in use by another agent; running without a spool",
                      self._path)
            return
        self._lock_file = lock
        for entry in sorted(self._path.iterdir()):
            name = entry.name
            if name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    entry.unlink()  # a write that never completed
                continue
            if not (name.startswith(_PREFIX) and name.endswith(_SUFFIX)):
                continue
            try:
                number = int(name[len(_PREFIX):-len(_SUFFIX)])
                data = entry.read_bytes()
            except (ValueError, OSError):
                self.stats.corrupt += 1
                continue
            self._segments[number] = (len(data), data.count(b"\n"))
            self._next = max(self._next, number + 1)
        self._refresh()
        if self._segments:
            log.info("event spool %s holds %d event(s) from before; re-sending them",
                     self._path, self.stats.records)

    def _refresh(self) -> None:
        self.stats.bytes = sum(b for b, _ in self._segments.values())
        self.stats.records = sum(r for _, r in self._segments.values())

    def _segment(self, number: int) -> Path:
        assert self._path is not None
        return self._path / f"{_PREFIX}{number:012d}{_SUFFIX}"

    def append(self, events: Sequence[HealthEvent]) -> None:
        """Keep as many of ``events`` as fit, in order; count the rest as dropped."""
        if not events:
            return
        with self._lock:
            if self._lock_file is None:
                self.stats.dropped += len(events)
                return
            room = self._max_bytes - self.stats.bytes
            lines = []
            for event in events:
                line = _line(event)
                if len(line) > room:
                    break
                room -= len(line)
                lines.append(line)
            dropped = len(events) - len(lines)
            if dropped:
                self.stats.dropped += dropped
                if not self._full_logged:
                    log.error("event spool %s is full (%d bytes): dropping events the collector "
                              "did not accept; counted in the agent's dropped-events metric",
                              self._path, self._max_bytes)
                    self._full_logged = True
            if not lines:
                return
            number = self._next
            self._next += 1
            target = self._segment(number)
            temporary = target.with_name(target.name + ".tmp")
            data = b"".join(lines)
            try:
                with temporary.open("wb") as out:
                    out.write(data)
                    out.flush()
                    os.fsync(out.fileno())
                temporary.rename(target)
            except OSError as error:
                self.stats.dropped += len(lines)
                log.error("cannot write the event spool %s: %s", target, error)
                with contextlib.suppress(OSError):
                    temporary.unlink()
                return
            self._segments[number] = (len(data), len(lines))
            self.stats.spooled += len(lines)
            self._refresh()

    def oldest(self) -> tuple[int, list[HealthEvent]] | None:
        """The oldest segment's events (unreadable lines skipped and counted)."""
        with self._lock:
            while self._segments:
                number = min(self._segments)
                try:
                    data = self._segment(number).read_bytes()
                except OSError:
                    self.stats.corrupt += 1
                    del self._segments[number]
                    self._refresh()
                    continue
                events = []
                for raw in data.splitlines():
                    event = _parse(raw)
                    if event is None:
                        self.stats.corrupt += 1
                    else:
                        events.append(event)
                if events:
                    return number, events
                self._delete(number)  # nothing readable left in it
            return None

    def remove(self, number: int) -> None:
        """The segment was accepted by the collector."""
        with self._lock:
            records = self._segments.get(number, (0, 0))[1]
            self._delete(number)
            self.stats.resent += records

    def _delete(self, number: int) -> None:
        with contextlib.suppress(OSError):
            self._segment(number).unlink()
        self._segments.pop(number, None)
        self._refresh()
        if self.stats.bytes < self._max_bytes // 2:
            self._full_logged = False  # log the next overflow again

    def close(self) -> None:
        with self._lock:
            if self._lock_file is not None:
                self._lock_file.close()
                self._lock_file = None


def _parse(raw: bytes) -> HealthEvent | None:
    crc, _, payload = raw.partition(b" ")
    try:
        if int(crc, 16) != zlib.crc32(payload):
            return None
        return HealthEvent.from_json(payload.decode())
    except (ValueError, KeyError, TypeError, UnicodeDecodeError):
        return None
