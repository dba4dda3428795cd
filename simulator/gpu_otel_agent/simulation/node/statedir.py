"""One simulated node per state directory: an flock held for the node's life.

The lock lives in ``DIR/node.lock``; the kernel drops it when the node dies, however it dies
(``kill -9`` included), so a free lock on an existing directory means the directory is stale
and may be reused.  While held, the file names its holder (pid, scenario, control socket) so
a second node can say who is in the way.
"""

from __future__ import annotations

import contextlib
import enum
import fcntl
import json
import os
import socket
import stat
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from gpu_otel_agent import unix_socket

LOCK_NAME = "node.lock"
MAX_PICKS = 64


class StateDirBusy(RuntimeError):
    """The state directory belongs to a running node (the message names it)."""


@dataclass(frozen=True)
class StateDirLock:
    """An acquired state directory; keep it (its descriptor) for the node's life."""

    path: Path
    fd: int

    def describe(self, **info: object) -> None:
        """Write who holds the lock (read by a node that finds the directory busy)."""
        data = json.dumps({"pid": os.getpid(), **info}).encode()
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, data + b"\n", 0)

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.close(self.fd)


def _try_lock(path: Path) -> StateDirLock | None:
    path.mkdir(parents=True, exist_ok=True)
    fd = os.open(path / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return StateDirLock(path, fd)


def holder(path: Path) -> dict[str, object]:
    """What the running node wrote into the lock file (empty if unreadable)."""
    try:
        data = json.loads((path / LOCK_NAME).read_text() or "{}")
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def busy_message(path: Path) -> str:
    h = holder(path)
    who = (
        f"the simulated node pid {h.get('pid', '?')} (scenario {h.get('scenario', '?')}, "
        f"control socket {h.get('socket', '?')})"
    )
    return (
        f"state directory {path} is in use by {who}; stop that node, or leave out --dir "
        "so `gpu-agent sim up` picks a free directory"
    )


def acquire(path: Path, pick_free: bool, skip: Collection[Path] = ()) -> StateDirLock:
    """Lock ``path``; if busy, the first free ``path.N`` (N = 2, 3, ...) when ``pick_free``
    (``skip``: directories tried already, whose socket is another node's).

    A directory whose lock is free is stale (its node died): the old state file is
    unlinked, not overwritten, so a client still mapping it keeps its own copy.
    """
    candidates = [path, *(path.with_name(f"{path.name}.{n}") for n in range(2, MAX_PICKS + 1))]
    for candidate in candidates if pick_free else candidates[:1]:
        if candidate in skip:
            continue
        lock = _try_lock(candidate)
        if lock is None:
            continue
        for stale in ("node.shm", "amd.shm"):
            with contextlib.suppress(FileNotFoundError):
                (candidate / stale).unlink()
        return lock
    if not pick_free:
        raise StateDirBusy(busy_message(path))
    raise StateDirBusy(f"no free state directory among {path}, {path}.2 ... {path}.{MAX_PICKS}")


class SocketState(enum.Enum):
    ABSENT = "absent"  # nothing at the path (or a link to nothing)
    STALE = "stale"  # a socket nobody listens on: its node is gone (connect refused)
    LIVE = "live"  # a node answers
    OTHER = "other"  # not a socket


def probe(path: Path) -> SocketState:
    """What is at ``path``, by a connect: only a refused connection proves a socket stale."""
    try:
        info = path.stat()  # through a link: what it points to
    except FileNotFoundError:
        return SocketState.ABSENT
    if not stat.S_ISSOCK(info.st_mode):
        return SocketState.OTHER
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(2)
        try:
            unix_socket.connect(s, path)
        except ConnectionRefusedError:
            return SocketState.STALE
        except OSError:  # a timeout, a permission: someone may be there
            return SocketState.LIVE
    return SocketState.LIVE


def claim_socket(path: Path) -> None:
    """Remove a stale socket (or a link to nothing) at ``path``; refuse if a live node answers
    on it."""
    state = probe(path)
    if (state is SocketState.ABSENT and path.is_symlink()) or state is SocketState.STALE:
        path.unlink()
    elif state is SocketState.OTHER:
        raise StateDirBusy(f"{path} exists and is not a socket")
    elif state is SocketState.LIVE:
        raise StateDirBusy(
            f"control socket {path} is served by another simulated node; give this one another "
            "--socket (or unset GPU_SIM_SOCKET)"
        )
