"""A classic BPF socket filter that lets through only the proc events of PIDs we watch.

The proc connector multicasts every fork, exec and exit on the host to every listener; the
agent only cares about the few that concern GPU processes it holds (an exit, an exec, a fork
that reuses the PID of one that exited). Measured on the bench node, each exec/exit pair that
reached Python cost the agent about 22 µs (a wake-up, two ``recv`` calls, the decoding), which
a host running data-loader workers or shell pipelines pays hundreds of times a second. A socket
filter runs in the kernel as the message is queued to our socket (``netlink_broadcast`` ->
``sk_filter``) and drops the rest before a byte is copied or the agent woken: the technique is
the one Scott James Remnant described for the proc connector ("Linux process events with a
socket filter", 2012), here with the PID list compiled in.

Netlink data is in host byte order, while ``BPF_LD|BPF_W|BPF_ABS`` loads big-endian: the
program compares byte-swapped constants (``_k``) and sorts the PIDs by their swapped value, so
``jgt`` can skip whole blocks of PIDs. ``C_CONSTANTS`` lists every opcode and option with the
C expression it must equal (checked against the kernel headers by a test).
"""

from __future__ import annotations

import ctypes
import socket
import struct
from collections.abc import Collection
from typing import Final

from gpu_otel_agent.workloads.cn_proc import (
    EXEC_PID_OFFSET,
    EXIT_PID_OFFSET,
    FORK_CHILD_OFFSET,
    PROC_EVENT_EXEC,
    PROC_EVENT_EXIT,
    PROC_EVENT_FORK,
    PROC_EVENT_NONE,
    WHAT_OFFSET,
)

# asm-generic/socket.h (every architecture the agent runs on uses these values)
SO_ATTACH_FILTER: Final = 26
SO_DETACH_FILTER: Final = 27
# linux/bpf_common.h and linux/filter.h
BPF_LD_W_ABS: Final = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
BPF_JMP_JEQ_K: Final = 0x05 | 0x10 | 0x00  # BPF_JMP | BPF_JEQ | BPF_K
BPF_JMP_JGT_K: Final = 0x05 | 0x20 | 0x00  # BPF_JMP | BPF_JGT | BPF_K
BPF_JMP_JA: Final = 0x05 | 0x00  # BPF_JMP | BPF_JA
BPF_RET_K: Final = 0x06 | 0x00  # BPF_RET | BPF_K
BPF_MAXINSNS: Final = 4096

C_CONSTANTS: Final[dict[str, int]] = {
    "SO_ATTACH_FILTER": SO_ATTACH_FILTER,
    "SO_DETACH_FILTER": SO_DETACH_FILTER,
    "BPF_LD | BPF_W | BPF_ABS": BPF_LD_W_ABS,
    "BPF_JMP | BPF_JEQ | BPF_K": BPF_JMP_JEQ_K,
    "BPF_JMP | BPF_JGT | BPF_K": BPF_JMP_JGT_K,
    "BPF_JMP | BPF_JA": BPF_JMP_JA,
    "BPF_RET | BPF_K": BPF_RET_K,
    "BPF_MAXINSNS": BPF_MAXINSNS,
    "sizeof(struct sock_filter)": 8,
}

ACCEPT: Final = 0xFFFFFFFF  # keep the whole message
DROP: Final = 0
BLOCK: Final = 64  # PIDs per block: a jgt skips 2 * BLOCK + 1 instructions (jt is 8 bits)
# The fixed part of the program (13 instructions) plus, per block, a header, two instructions
# per PID and a drop must fit the kernel's limit; past this many PIDs: every event.
MAX_PIDS: Final = (BPF_MAXINSNS - 13) // (2 * BLOCK + 2) * BLOCK

_INSN = struct.Struct("=HBBI")  # struct sock_filter: code, jt, jf, k


def _k(value: int) -> int:
    """``value`` as BPF_ABS loads it from host-order data (big-endian)."""
    return int.from_bytes(struct.pack("=I", value & 0xFFFFFFFF), "big")


def program(pids: Collection[int]) -> list[tuple[int, int, int, int]]:
    """The filter: fork, exec and exit events pass only for ``pids``; the connector's
    acknowledgements (``PROC_EVENT_NONE``) pass; every other event type (comm, uid, gid, sid,
    ptrace, coredump: the agent reads none) is dropped for every process, since a kernel that
    cannot filter event types itself (before 6.6) would otherwise wake the agent for each."""
    code: list[tuple[int, int, int, int]] = [
        (BPF_LD_W_ABS, 0, 0, WHAT_OFFSET),
        (BPF_JMP_JEQ_K, 5, 0, _k(PROC_EVENT_EXEC)),  # -> load the exec's pid
        (BPF_JMP_JEQ_K, 6, 0, _k(PROC_EVENT_EXIT)),  # -> load the exit's pid
        (BPF_JMP_JEQ_K, 7, 0, _k(PROC_EVENT_FORK)),  # -> load the fork's child pid
        (BPF_JMP_JEQ_K, 0, 1, _k(PROC_EVENT_NONE)),  # an acknowledgement
        (BPF_RET_K, 0, 0, ACCEPT),
        (BPF_RET_K, 0, 0, DROP),
        (BPF_LD_W_ABS, 0, 0, EXEC_PID_OFFSET),
        (BPF_JMP_JA, 0, 0, 3),
        (BPF_LD_W_ABS, 0, 0, EXIT_PID_OFFSET),
        (BPF_JMP_JA, 0, 0, 1),
        (BPF_LD_W_ABS, 0, 0, FORK_CHILD_OFFSET),
    ]
    keys = sorted({_k(pid) for pid in pids})
    for start in range(0, len(keys), BLOCK):
        block = keys[start:start + BLOCK]
        # Above this block's largest key: none of its PIDs can match, on to the next block.
        # Not above it and not in it: no later block holds it either (sorted), so drop.
        code.append((BPF_JMP_JGT_K, 2 * len(block) + 1, 0, block[-1]))
        for key in block:
            code.append((BPF_JMP_JEQ_K, 0, 1, key))
            code.append((BPF_RET_K, 0, 0, ACCEPT))
        code.append((BPF_RET_K, 0, 0, DROP))
    code.append((BPF_RET_K, 0, 0, DROP))
    return code


class _SockFprog(ctypes.Structure):
    _fields_ = (("len", ctypes.c_ushort), ("filter", ctypes.c_void_p))


def attach(sock: socket.socket, pids: Collection[int]) -> None:
    """Replace ``sock``'s filter with one for ``pids`` (one ``setsockopt``: the kernel swaps
    the programs, no event slips between). Raises OSError, ValueError past ``MAX_PIDS``."""
    if len(pids) > MAX_PIDS:
        raise ValueError(f"{len(pids)} PIDs do not fit one socket filter (at most {MAX_PIDS})")
    code = program(pids)
    # The kernel copies the instructions during the call: the buffer need only outlive it.
    instructions = ctypes.create_string_buffer(b"".join(_INSN.pack(*i) for i in code))
    fprog = _SockFprog(len(code), ctypes.addressof(instructions))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, bytes(fprog))


def detach(sock: socket.socket) -> None:
    """Every event again. Raises OSError (ENOENT when no filter was attached)."""
    sock.setsockopt(socket.SOL_SOCKET, SO_DETACH_FILTER, 0)
