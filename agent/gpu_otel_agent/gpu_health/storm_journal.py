"""Storm counts on disk: a repeat that storm control folded is as durable as the first event.

Storm control emits a fault's first occurrence at once (that event goes through the
write-ahead spool) and only counts the repeats inside the window, for one summary when the
window ends. Counted only in memory, a ``kill -9`` lost them all: ten XID 13s, then a crash,
and no summary was ever sent (issue 30). Here each count is appended to ``storm.jsonl`` in the
spool's own directory the moment it is counted (one small ``write``: in the kernel, so safe
from a crash of the agent, as the spool's segments are before their fsync), keyed by the
window: ``{"k": key, "w": window id, "c": count}`` (the key as its named fields,
:meth:`StormKey.to_json`). When the window's summary has been written
ahead by the event pusher, ``{"k": ..., "w": ..., "done": true}`` follows. On the next start,
every window with a count and no ``done`` is summarised: the summary's ``log.record.uid`` is
derived from the window, so one that did reach the spool before the crash (its ``done`` lost)
arrives twice with the same id, which the receiver can drop, as with the spool's re-sends.

Bounded: once the file passes ``MAX_BYTES`` it is rewritten with the open windows only.

Opened only once the spool is usable (the directory is the agent's own, 0700), and never
through a symbolic link (``O_NOFOLLOW``; the rewrite's temporary file is created ``O_EXCL``):
the agent runs as root, and a link left by a previous owner of the directory would have it
truncate and write another file.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from gpu_otel_agent.gpu_health.storm import BadStormKey, StormKey
from gpu_otel_agent.gpu_health.ulid import stable_ulid

log = logging.getLogger(__name__)
NAME = "storm.jsonl"
MAX_BYTES = 256 * 1024
FILE_MODE = 0o600


class Window(NamedTuple):
    """One storm window: whose repeats, since when (wall ns, its id)."""

    key: StormKey
    window: int


@dataclass(frozen=True)
class OpenWindow:
    key: StormKey
    window: int  # wall-clock ns of the window's first repeat: its id across restarts
    count: int


def summary_uid(key: StormKey, window: int) -> str:
    """The summary's id: the same for one window on every start."""
    return stable_ulid(window // 1_000_000, json.dumps([key.to_json(), window],
                                                       sort_keys=True).encode())


def _legacy(raw: object) -> StormKey:
    """A key as journals before the typed key wrote it: ``[gpu, event, code?]``, read by
    position that once only (a storm counted by the previous version survives the upgrade)."""
    if not isinstance(raw, list) or len(raw) < 2:
        raise BadStormKey(f"not a key: {raw!r}")
    gpu, event, *rest = raw
    code = rest[0] if rest and isinstance(rest[0], int) and not isinstance(rest[0], bool) \
        else None
    qualifier = "/".join(str(v) for v in rest) if code is None else ""
    return StormKey(str(gpu), str(event), code, qualifier)


class StormJournal:
    def __init__(self, directory: Path | None, max_bytes: int = MAX_BYTES) -> None:
        self._path = None if directory is None else directory / NAME
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._fd: int | None = None
        self._open: dict[Window, int] = {}  # -> its count
        self._pending: dict[str, Window] = {}  # by its summary's uid
        self._size = 0
        self.errors = 0
        self._opened = False

    @property
    def opened(self) -> bool:
        """``open`` was called: counts are journaled from now on (on disk where it can)."""
        return self._opened

    def open(self) -> list[OpenWindow]:
        """Take the file; the windows a previous run counted and never summarised."""
        self._opened = True
        if self._path is None:
            return []
        leftover: dict[Window, int] = {}
        data = b""
        try:
            fd = os.open(self._path, os.O_RDONLY | os.O_CLOEXEC | os.O_NOFOLLOW)
            with os.fdopen(fd, "rb") as stream:
                data = stream.read()
        except FileNotFoundError:
            pass
        except OSError as error:  # a symbolic link (ELOOP): not read, replaced below
            self._failed(error)
        if data:
            for raw in data.splitlines():
                try:
                    record = json.loads(raw)
                    stored = record["k"]
                    key = (_legacy(stored) if isinstance(stored, list)
                           else StormKey.from_json(stored))
                    ident = Window(key, int(record["w"]))
                    if record.get("done"):
                        leftover.pop(ident, None)
                    else:
                        leftover[ident] = max(leftover.get(ident, 0), int(record["c"]))
                except (ValueError, KeyError, TypeError):  # BadStormKey too
                    continue  # a line cut by the crash: the counts before it stand
        with self._lock:
            self._open = dict(leftover)
            try:
                self._rewrite()
            except OSError as error:
                self._failed(error)
        return [OpenWindow(key, window, count) for (key, window), count in leftover.items()]

    def count(self, key: StormKey, window: int, count: int) -> None:
        """``count`` repeats so far in ``window`` of ``key``."""
        with self._lock:
            self._open[Window(key, window)] = count
            self._append({"k": key.to_json(), "w": window, "c": count})

    def summarised(self, key: StormKey, window: int) -> str:
        """The window's summary is on its way: its uid; ``written`` closes the window."""
        uid = summary_uid(key, window)
        with self._lock:
            self._pending[uid] = Window(key, window)
        return uid

    def written(self, uids: list[str]) -> None:
        """The event pusher wrote these events ahead (they survive a crash from now on)."""
        with self._lock:
            for uid in uids:
                ident = self._pending.pop(uid, None)
                if ident is not None and self._open.pop(ident, None) is not None:
                    self._append({"k": ident.key.to_json(), "w": ident.window, "done": True})

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def _append(self, record: dict[str, object]) -> None:
        if self._fd is None:
            return
        line = json.dumps(record, separators=(",", ":"), default=str).encode() + b"\n"
        try:
            if self._size + len(line) > self._max_bytes:
                self._rewrite()
            os.write(self._fd, line)
            self._size += len(line)
        except OSError as error:
            self._failed(error)

    def _rewrite(self) -> None:
        """The open windows only, to a new file renamed over the old (one whole file)."""
        assert self._path is not None
        temporary = self._path.with_name(NAME + ".tmp")
        data = b"".join(json.dumps({"k": key.to_json(), "w": window, "c": count},
                                   separators=(",", ":"), default=str).encode() + b"\n"
                        for (key, window), count in self._open.items())
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()  # a rewrite a crash cut short (or a link: removed, not followed)
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, FILE_MODE)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        temporary.replace(self._path)
        if self._fd is not None:
            os.close(self._fd)
        self._fd = os.open(self._path, os.O_WRONLY | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW)
        self._size = len(data)

    def _failed(self, error: OSError) -> None:
        self.errors += 1
        if self.errors == 1:
            log.error("cannot write the storm journal %s (%s): storm counts are kept in memory "
                      "only (a crash loses the repeats not summarised yet)", self._path,
                      error.strerror or error)
