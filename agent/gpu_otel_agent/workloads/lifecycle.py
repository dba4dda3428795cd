"""Process exec/exit sources for the workload resolver, interchangeable.

Two implement it: the netlink proc connector (:mod:`gpu_otel_agent.workloads.netlink`, the
default) and the eBPF plugin's scheduler tracepoints (``attribution.process_events: ebpf``).
Either calls the same callbacks on the event loop; a source that cannot start says why and
returns False, and the resolver's reconciliation carries on alone.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class ProcessCallbacks:
    on_exec: Callable[[int], None]
    on_exit: Callable[[int], None]
    on_overflow: Callable[[], None]  # events were lost: reconcile now
    on_fork: Callable[[int], None]


class ProcessEvents(Protocol):
    def start(self, loop: asyncio.AbstractEventLoop) -> bool: ...

    def stop(self) -> None: ...

    def watch(self, pids: Collection[int] | None) -> None:
        """Only these PIDs' events matter (None: every process's); a source drops the others
        as early as it can (in the kernel, where it can). On the event loop, before or after
        ``start``."""


ProcessEventsFactory = Callable[[ProcessCallbacks], ProcessEvents]


def netlink_events(callbacks: ProcessCallbacks) -> ProcessEvents:
    from gpu_otel_agent.workloads.netlink import ProcConnector

    return ProcConnector(callbacks.on_exec, callbacks.on_exit, callbacks.on_overflow,
                         callbacks.on_fork)
