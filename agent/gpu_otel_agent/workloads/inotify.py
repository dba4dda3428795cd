"""Directory create/delete events through Linux inotify, on the event loop.

Used on cgroup directories (pods and containers appearing and vanishing) and on the kubelet
socket's directory (a kubelet restart recreates the socket). A small ctypes binding: the
events we need are four flags, and an extra dependency would buy nothing.
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import logging
import os
import struct
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

IN_CLOSE_WRITE = 0x8
IN_CREATE = 0x100
IN_DELETE = 0x200
IN_MOVED_FROM = 0x40
IN_MOVED_TO = 0x80
IN_DELETE_SELF = 0x400
IN_IGNORED = 0x8000
IN_Q_OVERFLOW = 0x4000
IN_ISDIR = 0x40000000
IN_NONBLOCK = 0o4000
IN_CLOEXEC = 0o2000000
_EVENT = struct.Struct("iIII")

# (directory watched, name inside it, mask) -> None
Handler = Callable[[Path, str, int], None]


class Inotify:
    def __init__(self, handler: Handler, on_overflow: Callable[[], None]) -> None:
        self._handler = handler
        self._on_overflow = on_overflow
        self._fd = -1
        self._libc: ctypes.CDLL | None = None
        self._paths: dict[int, Path] = {}
        self._by_path: dict[Path, int] = {}
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self, loop: asyncio.AbstractEventLoop) -> bool:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
            fd = libc.inotify_init1(IN_NONBLOCK | IN_CLOEXEC)
        except (OSError, AttributeError) as error:
            log.warning("inotify unavailable (%s); relying on reconciliation", error)
            return False
        if fd < 0:
            log.warning("inotify unavailable (%s); relying on reconciliation",
                        os.strerror(ctypes.get_errno()))
            return False
        self._libc, self._fd, self._loop = libc, fd, loop
        loop.add_reader(fd, self._readable)
        return True

    def watch(self, path: Path, mask: int = IN_CREATE | IN_DELETE | IN_MOVED_TO
              | IN_MOVED_FROM) -> bool:
        if self._libc is None or path in self._by_path:
            return path in self._by_path
        wd = self._libc.inotify_add_watch(self._fd, os.fsencode(path), mask)
        if wd < 0:
            log.debug("cannot watch %s: %s", path, os.strerror(ctypes.get_errno()))
            return False
        self._paths[wd] = path
        self._by_path[path] = wd
        return True

    @property
    def watched(self) -> int:
        return len(self._paths)

    def stop(self) -> None:
        if self._fd >= 0:
            if self._loop is not None and not self._loop.is_closed():
                self._loop.remove_reader(self._fd)
            os.close(self._fd)
            self._fd = -1
        self._paths.clear()
        self._by_path.clear()

    def _readable(self) -> None:
        try:
            data = os.read(self._fd, 64 * 1024)
        except BlockingIOError:
            return
        except OSError as error:
            log.debug("inotify read: %s", error)
            return
        offset = 0
        while offset + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
            raw_name = data[offset + _EVENT.size: offset + _EVENT.size + length]
            offset += _EVENT.size + length
            if mask & IN_Q_OVERFLOW:
                self._on_overflow()
                continue
            directory = self._paths.get(wd)
            if directory is None:
                continue
            if mask & IN_IGNORED:  # the watched directory itself went away
                self._paths.pop(wd, None)
                self._by_path.pop(directory, None)
                continue
            name = os.fsdecode(raw_name.rstrip(b"\0"))
            try:
                self._handler(directory, name, mask)
            except Exception:
                log.exception("handling inotify event on %s/%s", directory, name)
