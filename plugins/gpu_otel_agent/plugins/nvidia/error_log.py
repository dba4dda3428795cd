"""NVML errors counted per function and code, and logged at a bounded rate.

Under a flaky driver the same error repeats every cycle on every GPU; a log line each time
would bury everything else. The first occurrence of each (function, code) is logged; after
that one summary line per :data:`SUMMARY_S` says how many of each arrived since the last one.
Counts are per device (self-telemetry sums them); the log limiter is one per process.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable

from gpu_otel_agent.plugins.nvidia.error_policy import Policy, code_name, policy

log = logging.getLogger(__name__)
SUMMARY_S = 300.0

Key = tuple[str, str]  # (NVML function, code name)


class ErrorLogLimiter:
    """First occurrence per (function, code) at once, then a periodic summary. Thread-safe."""

    def __init__(self, summary_s: float = SUMMARY_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._lock = threading.Lock()
        self._seen: set[Key] = set()
        self._since: Counter[Key] = Counter()
        self._summary_s = summary_s
        self._clock = clock
        self._last_summary = clock()

    def note(self, function: str, code: int, where: str) -> None:
        key = (function, code_name(code))
        summary: list[tuple[Key, int]] = []
        with self._lock:
            first = key not in self._seen
            self._seen.add(key)
            if not first:
                self._since[key] += 1
            now = self._clock()
            if self._since and now - self._last_summary >= self._summary_s:
                summary = sorted(self._since.items())
                self._since.clear()
                self._last_summary = now
        if first:
            # Capability answers are expected on many GPUs: not worth a warning.
            level = logging.INFO if policy(code) is Policy.PERMANENT else logging.WARNING
            log.log(level, "%s: NVML %s answered %s (%s); further occurrences are counted in "
                    "gpu_agent.library.errors and summarised every %gs", where, function,
                    key[1], policy(code).value, self._summary_s)
        if summary:
            log.warning("NVML errors in the last %gs: %s", self._summary_s,
                        ", ".join(f"{f} {c} x{n}" for (f, c), n in summary))


LIMITER = ErrorLogLimiter()


class ErrorCounts:
    """One device's NVML errors per (function, code name). Written by the device's threads,
    copied by the export thread: the dict is replaced whole, never mutated in place."""

    def __init__(self, where: str, limiter: ErrorLogLimiter = LIMITER) -> None:
        self._where = where
        self._limiter = limiter
        self._lock = threading.Lock()
        self._counts: dict[Key, int] = {}

    def record(self, function: str, code: int) -> None:
        key = (function, code_name(code))
        with self._lock:
            counts = dict(self._counts)
            counts[key] = counts.get(key, 0) + 1
            self._counts = counts
        self._limiter.note(function, code, self._where)

    def snapshot(self) -> dict[Key, int]:
        return dict(self._counts)
