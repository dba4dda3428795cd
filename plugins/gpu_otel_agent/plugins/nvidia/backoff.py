"""Asking again later, less often each time: for answers that may change without a restart.

``NVML_ERROR_NO_PERMISSION`` (a container's permissions can be granted later) and the other
:data:`~gpu_otel_agent.plugins.nvidia.error_policy.Policy.BACKOFF` codes must not turn a
metric off for good, nor be asked every cycle. A failed item is skipped until its due time;
each failure doubles the wait up to a cap; one success forgets it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable

FIRST_S = 30.0
CAP_S = 600.0


class Backoff:
    def __init__(self, first_s: float = FIRST_S, cap_s: float = CAP_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._first = first_s
        self._cap = cap_s
        self._clock = clock
        self._waits: dict[Hashable, tuple[float, float]] = {}  # key -> (due, last wait)

    def due(self, key: Hashable) -> bool:
        entry = self._waits.get(key)
        return entry is None or self._clock() >= entry[0]

    def failed(self, key: Hashable) -> float:
        """Record a failure; returns the seconds until the key is due again."""
        entry = self._waits.get(key)
        wait = self._first if entry is None else min(entry[1] * 2, self._cap)
        self._waits[key] = (self._clock() + wait, wait)
        return wait

    def succeeded(self, key: Hashable) -> None:
        if self._waits:
            self._waits.pop(key, None)

    def waiting(self) -> int:
        return len(self._waits)
