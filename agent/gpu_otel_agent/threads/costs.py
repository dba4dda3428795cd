"""Where the agent's CPU goes: thread CPU time per stage of a cycle, and per thread.

Each stage adds the thread CPU time it took (``time.thread_time``: two clock reads, a few
microseconds, a few dozen times a second). ``SIGUSR1`` logs the totals so far with the CPU of
every thread (``cycle costs {json}``), which the benchmark reads at both ends of a window to
give the per-cycle breakdown: what the stages do not cover on a thread is its event-loop or
thread hand-off overhead, and what the Python threads do not cover is gRPC's own threads.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Final

SAMPLING: Final = "sampling"  # the device threads' jobs: library calls, readings
ATTRIBUTION: Final = "attribution"  # process lists -> per-process and container readings
SNAPSHOT: Final = "snapshot"  # publishing samples, taking the node snapshot
SELF_TELEMETRY: Final = "self-telemetry"  # the agent's own counters into the snapshot
SERIES: Final = "series"  # snapshot -> points per metric (every exporter)
ENCODING: Final = "encoding"  # points -> OTLP bytes
SENDING: Final = "sending"  # OTLP/gRPC or HTTP call, retries included
STAGES: Final = (SAMPLING, ATTRIBUTION, SNAPSHOT, SELF_TELEMETRY, SERIES, ENCODING, SENDING)

_lock = threading.Lock()
_spent: dict[str, float] = dict.fromkeys(STAGES, 0.0)
_local = threading.local()  # the innermost open stage of each thread


class Stage:
    """``with Stage(ENCODING): ...`` charges the stage with the thread CPU of the block, less
    what stages opened inside it were charged (each second is counted once). A stage may be
    entered again once it has exited (a device thread keeps one for its jobs), never while
    it is open."""

    __slots__ = ("_inner", "_name", "_outer", "_started")

    def __init__(self, name: str) -> None:
        self._name = name
        self._inner = 0.0
        self._outer: Stage | None = None
        self._started = 0.0

    def __enter__(self) -> None:
        self._inner = 0.0
        self._outer = getattr(_local, "top", None)
        _local.top = self
        self._started = time.thread_time()

    def __exit__(self, *_: object) -> None:
        elapsed = time.thread_time() - self._started
        _local.top = self._outer
        if self._outer is not None:
            self._outer._inner += elapsed
        with _lock:  # device threads add to "sampling" concurrently
            _spent[self._name] += elapsed - self._inner


def spent() -> dict[str, float]:
    """CPU seconds per stage since the agent started."""
    with _lock:
        return dict(_spent)


def process() -> float:
    """CPU seconds of the whole process so far, threads that have ended included (summing
    the live threads' schedstat lost an ended thread's whole CPU from a window's difference,
    so the Python threads could add up to more than the process)."""
    return time.process_time()


def threads() -> dict[str, float]:
    """CPU seconds of each Python thread, summed by name with its number dropped
    (``gpu-3`` -> ``gpu``, ``otlp-export_0`` -> ``otlp-export``) or by the family a
    ``NamedThread`` names (``gpu-courier-1`` -> ``gpu``)."""
    totals: dict[str, float] = {}
    for thread in threading.enumerate():
        try:  # the scheduler's run time of that thread, in ns (first field)
            with open(f"/proc/self/task/{thread.native_id}/schedstat", "rb") as file:
                seconds = int(file.read().split()[0]) / 1e9
        except (OSError, ValueError, IndexError):
            continue  # ended meanwhile, or no schedstat on this kernel
        # A thread that says its family is counted with it (the relay's courier with the
        # device threads whose legs it runs), whatever its name is at the moment.
        name = getattr(thread, "family", None) or re.sub(r"[-_]\d+$", "", thread.name)
        totals[name] = totals.get(name, 0.0) + seconds
    return totals
