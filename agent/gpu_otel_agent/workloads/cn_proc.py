"""The kernel's process-events connector messages, laid out with ``struct`` from the uapi headers.

The layouts are a small, stable kernel ABI: ``struct nlmsghdr`` (``linux/netlink.h``),
``struct cn_msg`` (``linux/connector.h``), ``struct proc_event`` and, since Linux 6.6,
``struct proc_input`` (``linux/cn_proc.h``). Netlink uses the host's byte order, hence ``=``.
``C_LAYOUT`` states every offset, size and constant we rely on as the C expression it must
equal, so a test compiles those expressions against the installed kernel headers and compares.

Why not pyroute2: its supported entry point (``from pyroute2 import ProcEventSocket``) runs
``pyroute2/__init__``, which imports every pyroute2 API (IPRoute, NDB, IPDB, conntrack, …).
Measured with pyroute2 0.9.7 on Python 3.11, median of 9 fresh interpreters that had already
imported what the agent always has (asyncio, typing, socket, struct, logging): 127 ms and
+14.0 MiB RSS for that import (146 ms / +24.8 MiB from a bare interpreter), 35 ms / +4.1 MiB
for the former ``sys.modules`` shortcut (which broke a later ``from pyroute2 import …`` in the
same process), and 7 ms / +0.5 MiB for ``workloads.netlink`` with this module. An idle agent
is ~57 MiB: the supported import would add a quarter to it for four message layouts. Nothing
else in the agent used pyroute2, so it is no longer a dependency.
"""

from __future__ import annotations

import struct
from typing import Final

# linux/netlink.h
NETLINK_CONNECTOR: Final = 11
NLMSG_DONE: Final = 3
# linux/connector.h
CN_IDX_PROC: Final = 0x1
CN_VAL_PROC: Final = 0x1
# linux/cn_proc.h: enum proc_cn_mcast_op and enum what
PROC_CN_MCAST_LISTEN: Final = 1
PROC_CN_MCAST_IGNORE: Final = 2
PROC_EVENT_NONE: Final = 0x00000000  # the connector's acknowledgement
PROC_EVENT_FORK: Final = 0x00000001
PROC_EVENT_EXEC: Final = 0x00000002
PROC_EVENT_EXIT: Final = 0x80000000

# struct nlmsghdr: nlmsg_len, nlmsg_type, nlmsg_flags, nlmsg_seq, nlmsg_pid
NLMSGHDR: Final = struct.Struct("=IHHII")
# struct cn_msg: id.idx, id.val, seq, ack, len, flags (then the payload)
CN_MSG: Final = struct.Struct("=IIIIHH")
# struct proc_event up to its union: what, cpu, timestamp_ns (aligned(8): already at offset 8)
PROC_EVENT: Final = struct.Struct("=IIQ")
# The union members we read; __kernel_pid_t is a C int.
FORK_EVENT: Final = struct.Struct("=iiii")  # parent_pid, parent_tgid, child_pid, child_tgid
EXEC_EVENT: Final = struct.Struct("=ii")  # process_pid, process_tgid
EXIT_EVENT: Final = struct.Struct("=iiIIii")  # pid, tgid, exit_code, exit_signal, parent pid/tgid
# Control payloads: the bare enum proc_cn_mcast_op, or struct proc_input (Linux 6.6+), whose
# size tells the kernel an event-type mask follows.
MCAST_OP: Final = struct.Struct("=I")
PROC_INPUT: Final = struct.Struct("=II")  # mcast_op, event_type

# Offsets in a whole netlink message, for the decoder that sees every fork and exit on the host.
WHAT_OFFSET: Final = NLMSGHDR.size + CN_MSG.size
EVENT_DATA_OFFSET: Final = WHAT_OFFSET + PROC_EVENT.size
FORK_CHILD_OFFSET: Final = EVENT_DATA_OFFSET + struct.calcsize("=ii")  # after the parent pair
EXEC_PID_OFFSET: Final = EVENT_DATA_OFFSET
EXIT_PID_OFFSET: Final = EVENT_DATA_OFFSET
# The smallest message that holds the (pid, tgid) pair of any event we decode.
MIN_EVENT_LENGTH: Final = max(FORK_CHILD_OFFSET + 8, EXEC_PID_OFFSET + 8, EXIT_PID_OFFSET + 8)

# What the values above must equal in C (checked against the kernel headers by a test).
# struct proc_input is absent from headers older than 6.6, so it is listed apart.
C_LAYOUT: Final[dict[str, int]] = {
    "NETLINK_CONNECTOR": NETLINK_CONNECTOR,
    "NLMSG_DONE": NLMSG_DONE,
    "CN_IDX_PROC": CN_IDX_PROC,
    "CN_VAL_PROC": CN_VAL_PROC,
    "PROC_CN_MCAST_LISTEN": PROC_CN_MCAST_LISTEN,
    "PROC_CN_MCAST_IGNORE": PROC_CN_MCAST_IGNORE,
    "PROC_EVENT_NONE": PROC_EVENT_NONE,
    "PROC_EVENT_FORK": PROC_EVENT_FORK,
    "PROC_EVENT_EXEC": PROC_EVENT_EXEC,
    "PROC_EVENT_EXIT": PROC_EVENT_EXIT,
    "sizeof(struct nlmsghdr)": NLMSGHDR.size,
    "offsetof(struct nlmsghdr, nlmsg_type)": 4,
    "offsetof(struct nlmsghdr, nlmsg_pid)": 12,
    "sizeof(struct cn_msg)": CN_MSG.size,
    "offsetof(struct cn_msg, len)": 16,
    "offsetof(struct cn_msg, flags)": 18,
    "offsetof(struct proc_event, cpu)": 4,
    "offsetof(struct proc_event, timestamp_ns)": 8,
    "offsetof(struct proc_event, event_data)": PROC_EVENT.size,
    "sizeof(struct fork_proc_event)": FORK_EVENT.size,
    "offsetof(struct fork_proc_event, child_pid)": FORK_CHILD_OFFSET - EVENT_DATA_OFFSET,
    "offsetof(struct fork_proc_event, child_tgid)": FORK_CHILD_OFFSET - EVENT_DATA_OFFSET + 4,
    "sizeof(struct exec_proc_event)": EXEC_EVENT.size,
    "offsetof(struct exec_proc_event, process_tgid)": 4,
    "sizeof(struct exit_proc_event)": EXIT_EVENT.size,
    "offsetof(struct exit_proc_event, process_tgid)": 4,
    "offsetof(struct exit_proc_event, exit_code)": 8,
    "sizeof(((struct proc_event *)0)->what)": 4,
    "sizeof(enum proc_cn_mcast_op)": MCAST_OP.size,
}
C_LAYOUT_SINCE_6_6: Final[dict[str, int]] = {
    "sizeof(struct proc_input)": PROC_INPUT.size,
    "offsetof(struct proc_input, event_type)": 4,
}


def control_message(action: int, port: int, event_mask: int | None = None) -> bytes:
    """A whole netlink message that starts (``PROC_CN_MCAST_LISTEN``) or stops listening.

    With ``event_mask`` the payload is ``struct proc_input`` and a 6.6+ kernel sends only those
    event types; without, it is the bare operation every kernel since 2.6.15 accepts.
    """
    payload = (MCAST_OP.pack(action) if event_mask is None
               else PROC_INPUT.pack(action, event_mask))
    connector = CN_MSG.pack(CN_IDX_PROC, CN_VAL_PROC, 0, 0, len(payload), 0) + payload
    header = NLMSGHDR.pack(NLMSGHDR.size + len(connector), NLMSG_DONE, 0, 0, port)
    return header + connector
