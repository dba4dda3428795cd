"""Asking again later, less often each time: for answers that may change without a restart.

``NVML_ERROR_NO_PERMISSION`` (a container's permissions can be granted later) and the other
:data:`~gpu_otel_agent.plugins.nvidia.error_policy.Policy.BACKOFF` codes must not turn a
metric off for good, nor be asked every cycle. A failed item is skipped until its due time;
each failure doubles the wait up to a cap; one success forgets it.

The first wait is 30 s. ``GPU_AGENT_NVML_BACKOFF_FIRST_S`` (seconds, read once when the
backend starts) shortens or lengthens it for a run that must see a granted permission sooner,
as the integration tests do; it is not a configuration key because nothing but a test has
needed it (say so in an issue if a node does).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Hashable, Mapping

FIRST_S = 30.0
CAP_S = 600.0
FIRST_ENV = "GPU_AGENT_NVML_BACKOFF_FIRST_S"

log = logging.getLogger(__name__)


def first_wait(environ: Mapping[str, str]) -> float:
    """The first wait: :data:`FIRST_ENV` if it holds a positive number of seconds, else
    :data:`FIRST_S` (a bad value is logged and ignored: a typo must not stop the agent)."""
    text = environ.get(FIRST_ENV)
    if text is None:
        return FIRST_S
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= CAP_S:
        log.warning("%s=%r is not a number of seconds in (0, %g]; the first back-off stays "
                    "%g s", FIRST_ENV, text, CAP_S, FIRST_S)
        return FIRST_S
    return value


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
