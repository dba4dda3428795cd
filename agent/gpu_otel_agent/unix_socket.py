"""Bind and connect Unix sockets at paths of any length.

Why: a socket's address (``sockaddr_un.sun_path``) holds 108 bytes on Linux, 107 with the
terminating NUL, so ``bind``/``connect`` on a deeper path fails with "AF_UNIX path too long"
although the path itself is fine for every other call (``stat``, ``chmod``, ``unlink``). Deep
paths are ordinary: ``$XDG_RUNTIME_DIR`` or a state directory under a test runner's temporary
tree easily passes 108 bytes.

How: a path that fits goes as it is. A longer one is reached through its directory: the
directory is opened (``O_PATH``: no read permission needed, only the search permission a plain
``connect`` needs too) and the socket is bound or connected at ``/proc/self/fd/<fd>/<name>``,
which the kernel resolves like any path, so the socket file is made in (or found in) the real
directory, with the same permission checks. The descriptor is closed once the call returns.
Only the file name must then fit (``MAX_NAME_BYTES``, 82 bytes); a longer one is refused with a
message that names the path, its length and the limit.

Standard library only: the local endpoint's client (``local/client.py``) imports this and must
run without the agent's dependencies.
"""

from __future__ import annotations

import contextlib
import errno
import os
import socket
from collections.abc import Iterator

# sockaddr_un.sun_path is 108 bytes on Linux, with the terminating NUL.
MAX_PATH_BYTES = 107


class UnixPathTooLong(OSError):
    """Even through its directory, the socket's file name does not fit a Unix socket address.

    An ``OSError`` (``ENAMETOOLONG``), so callers that report a failed ``bind``/``connect`` by
    its ``strerror`` report this one the same way."""


# The longest prefix a descriptor's directory can have (a descriptor is an int): a name that
# fits after it fits whatever descriptor the directory gets, so whether a path can be used
# does not depend on how many files the process has open.
_VIA_DIRECTORY = "/proc/self/fd/{fd}/"
MAX_NAME_BYTES = MAX_PATH_BYTES - len(_VIA_DIRECTORY.format(fd=2**31 - 1))


def check(path: str | os.PathLike[str]) -> None:
    """Raise ``UnixPathTooLong`` if ``path`` cannot be bound or connected even through its
    directory (its file name is too long); opens nothing."""
    raw = os.fsencode(path)
    if len(raw) <= MAX_PATH_BYTES:
        return
    name = os.path.basename(raw)
    if not name or len(name) > MAX_NAME_BYTES:
        raise UnixPathTooLong(
            errno.ENAMETOOLONG,
            f"socket path {os.fsdecode(raw)} is {len(raw)} bytes, longer than the "
            f"{MAX_PATH_BYTES} bytes a Unix socket address holds, and its file name "
            f"{os.fsdecode(name)!r} ({len(name)} bytes) is too long to reach through its "
            f"directory (at most {MAX_NAME_BYTES} bytes); choose a shorter socket name")


@contextlib.contextmanager
def address(path: str | os.PathLike[str]) -> Iterator[str]:
    """The address to bind or connect for ``path``, valid inside the ``with`` block: ``path``
    itself when it fits, else ``/proc/self/fd/<fd>/<name>`` with ``<fd>`` its directory, open
    until the block ends. Raises ``UnixPathTooLong`` when not even that fits, and what opening
    the directory raises (``FileNotFoundError``, ``PermissionError``, ...) as a plain
    ``connect`` would."""
    check(path)
    raw = os.fsencode(path)
    if len(raw) <= MAX_PATH_BYTES:
        yield os.fsdecode(raw)
        return
    directory, name = os.path.split(raw)
    fd = os.open(directory or b".", os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield _VIA_DIRECTORY.format(fd=fd) + os.fsdecode(name)
    finally:
        os.close(fd)


def bind(sock: socket.socket, path: str | os.PathLike[str]) -> None:
    """``sock.bind(path)`` for a path of any length (the socket file appears at ``path``)."""
    with address(path) as where:
        sock.bind(where)


def connect(sock: socket.socket, path: str | os.PathLike[str]) -> None:
    """``sock.connect(path)`` for a path of any length (``sock``'s timeout applies)."""
    with address(path) as where:
        sock.connect(where)

