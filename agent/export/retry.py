"""Retry with exponential back-off inside one deadline, as the OTLP specification asks.

Both transports use it: up to ``MAX_ATTEMPTS`` tries, 1 s, 2 s, 4 s ... apart with +/-20 %
jitter (the Python SDK's schedule), or the delay the collector asked for (gRPC ``RetryInfo``,
HTTP ``Retry-After``). A retry whose wait would end past the deadline is not made: the export
fails at once, so the caller's deadline holds. ``stop`` (set by shutdown) ends a wait early.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

MAX_ATTEMPTS = 6
JITTER = 0.2


@dataclass(frozen=True)
class Attempt:
    """What one try gave: done (success or a final failure), or retry after ``delay_s``."""

    ok: bool
    retryable: bool = False
    delay_s: float | None = None  # the collector's requested delay, if it named one


def backoff_s(retry: int) -> float:
    return float(2**retry) * random.uniform(1 - JITTER, 1 + JITTER)


def with_retries(
    attempt: Callable[[float], Attempt], timeout_s: float, stop: threading.Event
) -> bool:
    """Call ``attempt(remaining_seconds)`` until it succeeds, gives up, or time runs out."""
    deadline = time.monotonic() + timeout_s
    for retry in range(MAX_ATTEMPTS):
        remaining = deadline - time.monotonic()
        if remaining <= 0 or stop.is_set():
            return False
        outcome = attempt(remaining)
        if outcome.ok:
            return True
        if not outcome.retryable or retry + 1 == MAX_ATTEMPTS:
            return False
        delay = outcome.delay_s if outcome.delay_s is not None else backoff_s(retry)
        if delay >= deadline - time.monotonic():
            return False
        if stop.wait(delay):
            return False
    return False
