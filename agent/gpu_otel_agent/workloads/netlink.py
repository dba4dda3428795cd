"""Process exec and exit events from the kernel's netlink proc connector.

The socket is a plain non-blocking netlink socket watched by the event loop (``add_reader``);
messages are built and decoded with ``struct`` against the kernel's layouts (``cn_proc``).
Events cost us only for processes that start or end, never for idle ones; once the resolver
says which PIDs it holds (``watch``), a socket filter (``pid_filter``) drops every other
process's events in the kernel, so host process churn does not reach Python at all. Without
CAP_NET_ADMIN (or in a network/PID namespace that hides it) the socket cannot be opened: we
say so once and the low-rate reconciliation carries attribution alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import struct
from collections.abc import Callable, Collection

from gpu_otel_agent.workloads.cn_proc import (
    CN_IDX_PROC,
    EXEC_PID_OFFSET,
    EXIT_PID_OFFSET,
    FORK_CHILD_OFFSET,
    MIN_EVENT_LENGTH,
    NETLINK_CONNECTOR,
    PROC_CN_MCAST_IGNORE,
    PROC_CN_MCAST_LISTEN,
    PROC_EVENT_EXEC,
    PROC_EVENT_EXIT,
    PROC_EVENT_FORK,
    WHAT_OFFSET,
    control_message,
)
from gpu_otel_agent.workloads.pid_filter import MAX_PIDS, attach, detach

log = logging.getLogger(__name__)
RECV_BYTES = 256 * 1024
SOCKET_BUFFER = 4 * 1024 * 1024  # a fork storm must not overflow it before we read
# Linux 6.6 lets a listener ask for some event types only (struct proc_input); older kernels
# drop a control message of that size, so they get the plain one and every event.
FILTER_SINCE = (6, 6)
# Forks are the most frequent event and matter only for a reused PID, which the exec that
# usually follows (or the reconciliation) catches: not asked for where the kernel can filter.
WANTED = PROC_EVENT_EXEC | PROC_EVENT_EXIT
# After a wake-up the socket rests this long, so a busy host's event stream costs a bounded
# number of wake-ups a second (each one drains everything queued) instead of one per event.
COALESCE_SECONDS = 0.05

# A busy host forks and exits thousands of times a second; every event passes through here, so
# it reads just the fields it needs at fixed offsets.
_U32 = struct.Struct("=I")
_PAIR = struct.Struct("=ii")  # (pid, tgid)
_PROCESS_EVENTS = frozenset({PROC_EVENT_FORK, PROC_EVENT_EXEC, PROC_EVENT_EXIT})


def kernel_filters(release: str | None = None) -> bool:
    """Whether this kernel takes the event-type mask (6.6 and newer)."""
    # os.uname() is what platform.release() reads; platform itself is 0.1 MiB on run's path.
    text = release if release is not None else os.uname().release
    numbers = []
    for part in text.split(".")[:2]:
        digits = "".join(itertools.takewhile(str.isdigit, part))
        if not digits:
            return False
        numbers.append(int(digits))
    return tuple(numbers) >= FILTER_SINCE


class ProcConnector:
    """Calls ``on_exec(pid)`` / ``on_exit(pid)`` for processes (not threads), and
    ``on_fork(pid)`` for a new process (a PID may be reused without an exec)."""

    def __init__(self, on_exec: Callable[[int], None], on_exit: Callable[[int], None],
                 on_overflow: Callable[[], None],
                 on_fork: Callable[[int], None] = lambda pid: None) -> None:
        self._on_fork = on_fork
        self._on_exec = on_exec
        self._on_exit = on_exit
        self._on_overflow = on_overflow  # events were lost: reconcile now
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.process_events = 0  # fork, exec and exit messages decoded (of any process)
        self.filtered = kernel_filters()
        self._watched: frozenset[int] | None = None  # None: every process (no socket filter)
        self._filter_failed = False

    def start(self, loop: asyncio.AbstractEventLoop) -> bool:
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
        except OSError as error:
            log.warning("process events unavailable (netlink connector: %s); "
                        "attribution relies on periodic reconciliation", error.strerror)
            return False
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
            # The filter goes on before the bind, which joins the multicast group: while
            # any other listener on the host has the connector sending, events flow from the
            # bind on, and one of another process slipped in before the filter (CI saw it on a
            # loaded host, first between subscription and filter, then between bind and filter).
            self._sock = sock
            if self._watched is not None:
                self._apply(self._watched)
            sock.bind((0, CN_IDX_PROC))
            sock.send(self._control(PROC_CN_MCAST_LISTEN))
        except OSError as error:
            self._sock = None
            sock.close()
            log.warning("process events unavailable (netlink proc connector: %s; needs "
                        "CAP_NET_ADMIN and the host network namespace); attribution relies "
                        "on periodic reconciliation", error.strerror)
            return False
        sock.setblocking(False)
        self._loop = loop
        loop.add_reader(sock.fileno(), self._readable)
        log.info("listening to process exec/exit events (netlink proc connector)")
        return True

    def stop(self) -> None:
        sock, self._sock = self._sock, None
        if sock is None:
            return
        if self._loop is not None and not self._loop.is_closed():
            self._loop.remove_reader(sock.fileno())
        with contextlib.suppress(OSError):
            sock.send(self._control(PROC_CN_MCAST_IGNORE))
        sock.close()

    def watch(self, pids: Collection[int] | None) -> None:
        """Deliver events of ``pids`` only (filtered in the kernel); None: of every process.

        More PIDs than one filter holds (``pid_filter.MAX_PIDS``), or a kernel that refuses
        the filter: every event, as without one (said once)."""
        wanted = None if pids is None else frozenset(pids)
        if wanted == self._watched:
            return
        self._watched = wanted
        if self._sock is not None:
            self._apply(wanted)

    @property
    def filtering(self) -> bool:
        """Whether a PID filter is in place (the kernel drops other processes' events)."""
        return (self._sock is not None and self._watched is not None
                and len(self._watched) <= MAX_PIDS and not self._filter_failed)

    def _apply(self, pids: frozenset[int] | None) -> None:
        sock = self._sock
        if sock is None or self._filter_failed:
            return
        try:
            if pids is not None and len(pids) <= MAX_PIDS:
                attach(sock, pids)
            else:
                if pids is not None:
                    log.info("%d GPU processes: more than a socket filter holds (%d); process "
                             "events of the whole host are decoded", len(pids), MAX_PIDS)
                with contextlib.suppress(FileNotFoundError):  # ENOENT: none attached
                    detach(sock)
        except OSError as error:
            self._filter_failed = True
            log.warning("process events cannot be filtered in the kernel (%s); every "
                        "process's events are decoded", error.strerror)

    def _control(self, action: int) -> bytes:
        return control_message(action, os.getpid(), WANTED if self.filtered else None)

    def _readable(self) -> None:
        sock, loop = self._sock, self._loop
        if sock is None or loop is None:
            return
        for _ in range(1024):  # bounded per wake-up so a storm cannot starve the loop
            try:
                data = sock.recv(RECV_BYTES)
            except BlockingIOError:
                break
            except OSError as error:
                # ENOBUFS: the kernel dropped events; a reconciliation catches up.
                log.debug("netlink receive: %s", error)
                self._on_overflow()
                break
            self.handle(data)
        loop.remove_reader(sock.fileno())
        loop.call_later(COALESCE_SECONDS, self._resume, sock)

    def _resume(self, sock: socket.socket) -> None:
        if self._sock is sock and self._loop is not None and not self._loop.is_closed():
            self._loop.add_reader(sock.fileno(), self._readable)

    def handle(self, data: bytes) -> None:
        offset = 0
        end = len(data)
        while offset + MIN_EVENT_LENGTH <= end:
            (length,) = _U32.unpack_from(data, offset)
            if length < MIN_EVENT_LENGTH or offset + length > end:
                return  # not a whole process event: nothing more to read
            (what,) = _U32.unpack_from(data, offset + WHAT_OFFSET)
            if what in _PROCESS_EVENTS:
                self.process_events += 1
            if what == PROC_EVENT_EXIT:
                pid, tgid = _PAIR.unpack_from(data, offset + EXIT_PID_OFFSET)
                if pid == tgid:  # a process, not one of its threads
                    self._on_exit(pid)
            elif what == PROC_EVENT_EXEC:
                pid, tgid = _PAIR.unpack_from(data, offset + EXEC_PID_OFFSET)
                if pid == tgid:
                    self._on_exec(pid)
            elif what == PROC_EVENT_FORK:
                pid, tgid = _PAIR.unpack_from(data, offset + FORK_CHILD_OFFSET)
                if pid == tgid:
                    self._on_fork(pid)
            offset += (length + 3) & ~3  # NLMSG_ALIGN
