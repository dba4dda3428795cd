"""Process exec and exit events from the kernel's netlink proc connector.

The socket is a plain non-blocking netlink socket watched by the event loop (``add_reader``);
messages are built and decoded with pyroute2's connector definitions. Events cost us only for
processes that start or end, never for idle ones, and a PID we are not tracking is one dict
miss. Without CAP_NET_ADMIN (or in a network/PID namespace that hides it) the socket cannot be
opened: we say so once and the low-rate reconciliation carries attribution alone.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable

from agent.workloads.cn_proc import (
    CN_IDX_PROC,
    CN_VAL_PROC,
    NETLINK_CONNECTOR,
    NLMSG_DONE,
    PROC_CN_MCAST_IGNORE,
    PROC_CN_MCAST_LISTEN,
    PROC_EVENT_EXEC,
    PROC_EVENT_EXIT,
    ProcEventMarshal,
    proc_event_control,
)

log = logging.getLogger(__name__)
RECV_BYTES = 256 * 1024
SOCKET_BUFFER = 4 * 1024 * 1024  # a fork storm must not overflow it before we read


class ProcConnector:
    """Calls ``on_exec(pid)`` / ``on_exit(pid)`` for thread-group leaders (processes)."""

    def __init__(self, on_exec: Callable[[int], None], on_exit: Callable[[int], None],
                 on_overflow: Callable[[], None]) -> None:
        self._on_exec = on_exec
        self._on_exit = on_exit
        self._on_overflow = on_overflow  # events were lost: reconcile now
        self._sock: socket.socket | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._marshal = ProcEventMarshal()
        self.events = 0

    def start(self, loop: asyncio.AbstractEventLoop) -> bool:
        try:
            sock = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
        except OSError as error:
            log.warning("process events unavailable (netlink connector: %s); "
                        "attribution relies on periodic reconciliation", error.strerror)
            return False
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, SOCKET_BUFFER)
            sock.bind((0, CN_IDX_PROC))
            sock.send(self._control(PROC_CN_MCAST_LISTEN))
        except OSError as error:
            sock.close()
            log.warning("process events unavailable (netlink proc connector: %s; needs "
                        "CAP_NET_ADMIN and the host network namespace); attribution relies "
                        "on periodic reconciliation", error.strerror)
            return False
        sock.setblocking(False)
        self._sock = sock
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

    @staticmethod
    def _control(action: int) -> bytes:
        msg = proc_event_control()
        msg["header"] = {"type": NLMSG_DONE, "flags": 0, "sequence_number": 0,
                         "pid": os.getpid()}
        msg["idx"] = CN_IDX_PROC
        msg["val"] = CN_VAL_PROC
        msg["len"] = 4
        msg["action"] = action
        msg.encode()
        return bytes(msg.data)

    def _readable(self) -> None:
        sock = self._sock
        if sock is None:
            return
        for _ in range(64):  # bounded per wake-up so a storm cannot starve the loop
            try:
                data = sock.recv(RECV_BYTES)
            except BlockingIOError:
                return
            except OSError as error:
                # ENOBUFS: the kernel dropped events; a reconciliation catches up.
                log.debug("netlink receive: %s", error)
                self._on_overflow()
                return
            self.handle(data)

    def handle(self, data: bytes) -> None:
        for message in self._marshal.parse(data):
            what = message.get("what")
            if what not in (PROC_EVENT_EXEC, PROC_EVENT_EXIT):
                continue
            pid = message.get("process_pid")
            if pid is None or pid != message.get("process_tgid"):
                continue  # a thread, not a process
            self.events += 1
            if what == PROC_EVENT_EXIT:
                self._on_exit(int(pid))
            else:
                self._on_exec(int(pid))
