"""The events' write-ahead log: every event is on disk before its first send.

Each batch the pusher takes becomes one segment file (``seg-<n>.jsonl``, written to a
temporary name and renamed, so a crash leaves whole segments only) the moment it arrives: from
then on a ``kill -9`` of the agent cannot lose it (the data is the kernel's). :meth:`sync` then
fsyncs every segment written since the last sync, and the directory, in one go, so the events
also survive a power cut; only then is a segment offered to the collector, and it is deleted
only when the collector has accepted its events. Syncing whatever was written meanwhile is the
group commit: an event storm (already folded by storm control) costs a few fsyncs, not one per
event, and a slow fsync never delays the next write. A line is ``<crc32> <json>``. Segments
are sent oldest first, so the order of events holds across an outage and across restarts —
also after ``kill -9``: what was written is sent again, with the same ``log.record.uid``.
This is how the OpenTelemetry Collector's persistent queue (exporterhelper with a
``file_storage`` extension) and Fluent Bit's filesystem buffering keep data across a crash:
write first, delete on acknowledgement, tolerate a duplicate.

The spool holds pod names, namespaces and job ids: its directory is 0700 and its files 0600,
owned by the agent's user; a spool someone made more open, or another user's directory (that
user could delete real events or plant forged ones, exported as genuine), is refused with an
error that says what to do (``spool_problem``, which ``gpu-agent check`` runs too). A segment
owned by another user is not replayed.

Bounded: when the spool is full, events that do not fit are not made durable (sent live if
the collector is up, dropped and counted if it is not — the first events of an incident are
the ones kept). Damage never stops the agent: an unreadable segment or line is counted as
corrupt and skipped; a directory that cannot be used (locked by another agent, read-only,
too open) or a write that fails (disk full) is logged, counted in ``errors``, and events go
on being sent live while the collector is up.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import logging
import os
import stat
import threading
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from gpu_otel_agent.gpu_health.events import HealthEvent

log = logging.getLogger(__name__)
_PREFIX, _SUFFIX = "seg-", ".jsonl"
DIR_MODE, FILE_MODE = 0o700, 0o600
CORRUPT_LOG_S = 60.0


@dataclass
class SpoolStats:
    spooled: int = 0  # events written (and fsynced) to disk
    resent: int = 0  # events from a previous run (or a failed send) later accepted
    dropped: int = 0  # events lost: not durable (spool full) while the collector was away
    corrupt: int = 0  # lines or segments that could not be read back
    errors: int = 0  # spool failures: unusable directory, failed writes, corrupt data
    records: int = 0  # events in the spool now
    bytes: int = 0  # its size now
    writes: int = 0  # fsync groups: syncs that made written segments durable (group commit)
    write_ns: int = 0  # time spent writing ahead (write and rename, then fsyncs)


@dataclass(frozen=True)
class Written:
    """What :meth:`Spool.append` made durable: the first ``kept`` events, as ``segment``."""

    segment: int | None
    kept: int
    full: bool  # the rest did not fit (rather than: the spool cannot be written)


def _line(event: HealthEvent) -> bytes:
    payload = event.to_json().encode()
    return b"%08x %s\n" % (zlib.crc32(payload), payload)


@dataclass(frozen=True)
class Segment:
    """What the index knows of one segment file without reading it again."""

    size: int  # bytes
    records: int
    old: bool  # from before this start, or sent once already: its events count as re-sent


class SpoolTooOpen(Exception):
    pass


class Spool:
    def __init__(self, path: Path | None, max_bytes: int) -> None:
        self._path = path
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._segments: dict[int, Segment] = {}  # by segment number
        self._next = 0
        self._unsynced: set[int] = set()  # written, not yet fsynced: not offered yet
        self._lock_file: IO[bytes] | None = None
        self._dir_fd: int | None = None
        self._full_logged = False
        self._write_error: str | None = None  # the last failure logged, until a write works
        self._corrupt_logged_at: float | None = None
        self._kept = False
        self._corrupt_unlogged = 0
        self.stats = SpoolStats()

    @property
    def usable(self) -> bool:
        return self._lock_file is not None

    @property
    def keeps(self) -> bool:
        """Events written here stay on disk for the next start (the spool was usable; it
        still is, or was closed at shutdown with them in it)."""
        return self._kept

    @property
    def path(self) -> Path | None:
        return self._path

    def open(self) -> None:
        """Take the directory (lock it, index its segments). Never raises."""
        if self._path is None:
            log.warning("no event spool configured: events are not kept across a crash, and "
                        "those the collector refuses are lost")
            return
        dir_fd = -1
        try:
            prepare(self._path)
            # Everything from here on goes through this descriptor, the directory that was
            # checked: a path swapped meanwhile, or a symbolic link planted in it, is never
            # followed (files are opened relative to it with O_NOFOLLOW).
            dir_fd = os.open(self._path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            problem = _problem(self._path, os.fstat(dir_fd))
            if problem is not None:
                raise SpoolTooOpen(problem)
            lock = os.fdopen(open_private(dir_fd, ".lock", os.O_WRONLY | os.O_APPEND), "ab")
        except SpoolTooOpen as error:
            os.close(dir_fd)
            self.stats.errors += 1
            log.error("%s; running without a spool: events are sent while the collector is "
                      "up but not kept across a crash", error)
            return
        except OSError as error:
            if dir_fd >= 0:
                os.close(dir_fd)
            self.stats.errors += 1
            log.error("event spool %s is unusable (%s%s); running without a spool: events are "
                      "sent while the collector is up but not kept across a crash",
                      self._path, error.strerror or error, _LINK_HINT.get(error.errno or 0, ""))
            return
        try:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            lock.close()
            os.close(dir_fd)
            self.stats.errors += 1
            log.error("event spool %s is in use by another agent (one agent per node: stop "
                      "that one, or set health.spool_path / GPU_AGENT_EVENT_SPOOL to a "
                      "directory of this one's); running without a spool", self._path)
            return
        self._lock_file = lock
        self._kept = True
        self._dir_fd = dir_fd
        for name in sorted(os.listdir(dir_fd)):
            entry = self._path / name
            if name.endswith(".tmp"):
                with contextlib.suppress(OSError):
                    os.unlink(name, dir_fd=dir_fd)  # a write that never completed: never sent
                continue
            if not (name.startswith(_PREFIX) and name.endswith(_SUFFIX)):
                continue
            try:
                number = int(name[len(_PREFIX):-len(_SUFFIX)])
                owner = os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_uid
                if owner != os.geteuid():
                    self.stats.errors += 1
                    log.error("event spool segment %s belongs to another user (uid %d): not "
                              "sent (it may be forged); remove it", entry, owner)
                    continue
                data = _read(dir_fd, name)
            except (ValueError, OSError):
                self._corrupt(1, f"unreadable segment {name}")
                continue
            self._segments[number] = Segment(len(data), data.count(b"\n"), old=True)
            self._next = max(self._next, number + 1)
        self._refresh()
        if self._segments:
            log.info("event spool %s holds %d event(s) from before; re-sending them",
                     self._path, self.stats.records)

    def _corrupt(self, count: int, what: str) -> None:
        """Counted always; logged at most once a minute (a damaged disk can yield thousands)."""
        self.stats.corrupt += count
        self.stats.errors += count
        self._corrupt_unlogged += count
        now = time.monotonic()
        if self._corrupt_logged_at is None or now - self._corrupt_logged_at >= CORRUPT_LOG_S:
            log.warning("event spool %s: %s skipped (%d corrupt record(s) since the last such "
                        "line; counted in gpu_agent.events.spool.errors)", self._path, what,
                        self._corrupt_unlogged)
            self._corrupt_logged_at = now
            self._corrupt_unlogged = 0

    def _refresh(self) -> None:
        self.stats.bytes = sum(segment.size for segment in self._segments.values())
        self.stats.records = sum(segment.records for segment in self._segments.values())

    @staticmethod
    def _segment(number: int) -> str:
        """A segment's name in the spool directory (opened relative to its descriptor)."""
        return f"{_PREFIX}{number:012d}{_SUFFIX}"

    @property
    def dir_fd(self) -> int | None:
        """The spool directory's descriptor while the spool is usable (None otherwise): the
        dead letters and the storm journal open their files relative to it."""
        return self._dir_fd if self._lock_file is not None else None

    def append(self, events: Sequence[HealthEvent]) -> Written:
        """Write as many of ``events`` as fit, in order, as one new segment (safe from a crash
        of the agent at once; from a power cut once :meth:`sync` has run)."""
        with self._lock:
            if self._lock_file is None or not events:
                return Written(None, 0, full=False)
            room = self._max_bytes - self.stats.bytes
            lines = []
            for event in events:
                line = _line(event)
                if len(line) > room:
                    break
                room -= len(line)
                lines.append(line)
            full = len(lines) < len(events)
            if full and not self._full_logged:
                log.error("event spool %s is full (%d bytes): newer events are not kept on "
                          "disk (sent if the collector is up, else dropped and counted in the "
                          "agent's dropped-events metric)", self._path, self._max_bytes)
                self._full_logged = True
            if not lines:
                return Written(None, 0, full)
            number = self._next
            target = self._segment(number)
            temporary = target + ".tmp"
            data = b"".join(lines)
            started = time.perf_counter_ns()
            try:
                try:
                    self._write_segment(temporary, target, data)
                except FileNotFoundError:
                    if not self._recreate():
                        raise
                    number = self._next
                    target = self._segment(number)
                    temporary = target + ".tmp"
                    self._write_segment(temporary, target, data)
            except OSError as error:
                self._failed(error)
                return Written(None, 0, full=False)
            self._next += 1
            self._unsynced.add(number)
            self.stats.write_ns += time.perf_counter_ns() - started
            if self._write_error is not None:
                log.info("event spool %s is writable again", self._path)
                self._write_error = None
            self._segments[number] = Segment(len(data), len(lines), old=False)
            self.stats.spooled += len(lines)
            self._refresh()
            return Written(number, len(lines), full)

    def _write_segment(self, temporary: str, target: str, data: bytes) -> None:
        dir_fd = self._dir_fd
        assert dir_fd is not None
        try:
            self._write(dir_fd, temporary, data)
            os.rename(temporary, target, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except OSError:
            with contextlib.suppress(OSError):
                os.unlink(temporary, dir_fd=dir_fd)
            raise

    def _recreate(self) -> bool:
        """The directory was removed while the agent ran (an operator's ``rm -rf``, a
        cleaner): make it again and take it, as at start, so later events are durable again
        (issue 39: nothing was, until a restart). The segments that went with it are
        forgotten. False when it was not removed, or cannot be made again."""
        assert self._path is not None and self._dir_fd is not None
        with contextlib.suppress(OSError):
            if os.fstat(self._dir_fd).st_nlink > 0:
                return False  # still there: the error was something else
        try:
            prepare(self._path)
            dir_fd = os.open(self._path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as error:
            log.error("event spool %s was removed and cannot be made again (%s)", self._path,
                      error.strerror or error)
            return False
        try:
            problem = _problem(self._path, os.fstat(dir_fd))
            if problem is not None:
                raise SpoolTooOpen(problem)
            lock = os.fdopen(open_private(dir_fd, ".lock", os.O_WRONLY | os.O_APPEND), "ab")
            try:
                fcntl.flock(lock.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                lock.close()
                raise
        except (OSError, SpoolTooOpen) as error:
            os.close(dir_fd)
            log.error("event spool %s was removed; the one now there is not usable (%s)",
                      self._path, error)
            return False
        lost = self.stats.records
        assert self._lock_file is not None
        self._lock_file.close()
        os.close(self._dir_fd)
        self._lock_file, self._dir_fd = lock, dir_fd
        self._segments.clear()
        self._unsynced.clear()
        self._refresh()
        self.stats.errors += 1
        log.error("event spool %s was removed while the agent ran: made again (%d event(s) "
                  "waiting in it went with it; counted in gpu_agent.events.spool.errors)",
                  self._path, lost)
        return True

    @staticmethod
    def _write(dir_fd: int, name: str, data: bytes) -> None:
        fd = open_private(dir_fd, name, os.O_WRONLY | os.O_EXCL)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    @property
    def unsynced(self) -> bool:
        return bool(self._unsynced)

    def sync(self) -> None:
        """Fsync every segment written since the last sync, then the directory (the renames);
        they can be offered to the collector from then on. Runs without the lock, so writes
        go on meanwhile."""
        with self._lock:
            numbers = sorted(self._unsynced)
        if not numbers:
            return
        started = time.perf_counter_ns()
        try:
            for number in numbers:
                assert self._dir_fd is not None
                fd = os.open(self._segment(number), _READ, dir_fd=self._dir_fd)
                try:
                    os.fsync(fd)
                finally:
                    os.close(fd)
            if self._dir_fd is not None:
                os.fsync(self._dir_fd)
        except OSError as error:
            # Written but maybe not durable: still offered (the collector may yet take them).
            with self._lock:
                self._failed(error)
        with self._lock:
            self._unsynced.difference_update(numbers)
            self.stats.writes += 1
            self.stats.write_ns += time.perf_counter_ns() - started

    def _failed(self, error: OSError) -> None:
        self.stats.errors += 1
        what = errno.errorcode.get(error.errno or 0, str(error))
        if what == self._write_error:
            return  # logged once per condition, not once per batch
        self._write_error = what
        hint = {errno.ENOSPC: "the disk is full: free space",
                errno.EDQUOT: "the disk quota is exhausted: free space",
                errno.EROFS: "the file system is read-only: remount it read-write",
                errno.EACCES: "permission denied: give the agent the directory"}.get(
                    error.errno or 0, "check the disk")
        log.error("cannot write the event spool %s (%s): %s, or set health.spool_path "
                  "elsewhere; events are still sent while the collector is up, but not kept "
                  "across a crash (counted in gpu_agent.events.spool.errors)",
                  self._path, error.strerror or error, hint)

    def _sendable(self) -> list[int]:
        if self._dir_fd is None:
            # Closed at shutdown: a send that outlived the close (a hung collector answering
            # late) offers nothing more; what is on disk waits for the next start.
            return []
        return [n for n in self._segments if n not in self._unsynced]

    @property
    def sendable(self) -> bool:
        """Some segment is durable and waits for the collector."""
        with self._lock:
            return bool(self._sendable())

    def oldest_number(self) -> int | None:
        with self._lock:
            return min(self._sendable(), default=None)

    def oldest(self) -> tuple[int, list[HealthEvent]] | None:
        """The oldest durable segment's events (unreadable lines skipped and counted)."""
        with self._lock:
            while sendable := self._sendable():
                number = min(sendable)
                try:
                    assert self._dir_fd is not None
                    data = _read(self._dir_fd, self._segment(number))
                except OSError:
                    self._corrupt(1, f"unreadable segment {number}")
                    del self._segments[number]
                    self._refresh()
                    continue
                events = []
                for line, raw in enumerate(data.splitlines(), 1):
                    event = _parse(raw)
                    if event is None:
                        self._corrupt(1, f"a corrupt record (segment {number}, line {line})")
                    else:
                        events.append(event)
                if events:
                    return number, events
                self._delete(number)  # nothing readable left in it
            return None

    def remove(self, number: int) -> None:
        """The segment's events were accepted by the collector."""
        with self._lock:
            segment = self._segments.get(number)
            self._delete(number)
            if segment is not None and segment.old:
                self.stats.resent += segment.records

    def mark_resent(self, number: int) -> None:
        """A send of the segment failed: once accepted, its events count as re-sent."""
        with self._lock:
            if number in self._segments:
                self._segments[number] = replace(self._segments[number], old=True)

    def _delete(self, number: int) -> None:
        # No fsync: should the deletion be lost to a power cut, the events are sent again
        # with the same ids, which the receiver can drop.
        if self._dir_fd is not None:
            with contextlib.suppress(OSError):
                os.unlink(self._segment(number), dir_fd=self._dir_fd)
        self._segments.pop(number, None)
        self._refresh()
        if self.stats.bytes < self._max_bytes // 2:
            self._full_logged = False  # log the next overflow again

    def close(self) -> None:
        with self._lock:
            if self._lock_file is not None:
                self._lock_file.close()
                self._lock_file = None
            if self._dir_fd is not None:
                os.close(self._dir_fd)
                self._dir_fd = None


def prepare(path: Path) -> None:
    """Create the spool directory if it is missing, private from the start (0700): never with
    a mode the agent would then refuse (``gpu-agent check`` creates it the same way)."""
    path.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)


def spool_problem(path: Path) -> str | None:
    """Why the agent refuses ``path`` as its spool (None: it is fine). The spool holds pod
    names and job ids: a directory others can read or enter, or one another user owns (who
    could delete real events or plant forged ones), is refused. Files in a 0700 directory are
    out of others' reach whatever their mode, so the directory is the boundary. Shared by
    ``Spool.open`` and ``gpu-agent check``, so a check passes exactly when the agent would
    use the spool."""
    return _problem(path, path.stat())


def _problem(path: Path, info: os.stat_result) -> str | None:
    if not stat.S_ISDIR(info.st_mode):
        return f"event spool {path} is not a directory"
    if info.st_uid != os.geteuid():
        return (f"event spool {path} belongs to uid {info.st_uid}, not the agent's "
                f"{os.geteuid()}: that user could delete or forge events; run `chown -R "
                f"{os.geteuid()} {path}` after checking its files, or set health.spool_path "
                f"elsewhere")
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        return (f"event spool {path} is open to other users (mode {mode:04o}, must be 0700): "
                f"it holds pod names and job ids; run `chmod 700 {path} && chmod 600 "
                f"{path}/*` (its events are kept and sent on the next start)")
    return None


# Files in the spool are never reached through a symbolic link: the agent runs as root, and a
# link planted by whoever owned the directory before would have it write (or read) another
# file (issue 39: dead letters appended to a root-owned file through another user's link).
_READ = os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW
_LINK_HINT = {errno.ELOOP: ": a symbolic link in the spool, not followed; remove it"}


def open_private(dir_fd: int, name: str, flags: int) -> int:
    """``name`` in the spool directory, created 0600, never through a symbolic link."""
    return os.open(name, flags | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW, FILE_MODE,
                   dir_fd=dir_fd)


def _read(dir_fd: int, name: str) -> bytes:
    fd = os.open(name, _READ, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as stream:
        return stream.read()


def _parse(raw: bytes) -> HealthEvent | None:
    crc, _, payload = raw.partition(b" ")
    try:
        if int(crc, 16) != zlib.crc32(payload):
            return None
        return HealthEvent.from_json(payload.decode())
    except (ValueError, KeyError, TypeError, UnicodeDecodeError, OverflowError,
            RecursionError):
        return None
