"""Retry with exponential back-off inside one deadline, as the OTLP specification asks.

Both transports use it: up to ``MAX_ATTEMPTS`` tries, 1 s, 2 s, 4 s ... apart with +/-20 %
jitter (the Python SDK's schedule), or the delay the collector asked for (gRPC ``RetryInfo``,
HTTP ``Retry-After``). A delay the collector asked for is put on the endpoint's
:class:`~gpu_otel_agent.export.otlp.throttle.ThrottleGate`, so it holds every later request to that
collector too, not only this one's retries. A retry whose wait would end past the deadline is
not made: the export fails at once, so the caller's deadline holds. ``stop`` (set by shutdown)
ends a wait early.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from gpu_otel_agent.export.otlp.target import OtlpTarget
from gpu_otel_agent.export.otlp.throttle import ThrottleGate

MAX_ATTEMPTS = 6
JITTER = 0.2
THROTTLED = "THROTTLED"  # the code of an attempt not made: the gate was closed


@dataclass(frozen=True)
class Attempt:
    """What one try gave: done (success or a final failure), or retry after ``delay_s``."""

    ok: bool
    retryable: bool = False
    delay_s: float | None = None  # the collector's requested delay, if it named one
    code: str = ""  # the answer's code when it failed (gRPC status name, HTTP status)
    # The collector refused what the request holds (gRPC INVALID_ARGUMENT, HTTP 400): sent
    # again it would be refused again. Other final answers (UNAUTHENTICATED, a 404) are about
    # the agent's settings, not its data: those requests wait for the operator instead.
    bad_content: bool = False


# The outcomes without details, made once (frozen; an Attempt is ~1.4 µs to build).
SENT = Attempt(ok=True)
_NOT_YET = Attempt(ok=False, retryable=True)  # time ran out before any answer


def backoff_s(retry: int) -> float:
    return float(2**retry) * random.uniform(1 - JITTER, 1 + JITTER)


def budget(target: OtlpTarget, timeout_s: float | None) -> float:
    """A send's time: the configured timeout, or the caller's deadline when it is shorter."""
    return target.timeout_s if timeout_s is None else min(timeout_s, target.timeout_s)


def with_retries(
    attempt: Callable[[float], Attempt], timeout_s: float, stop: threading.Event,
    gate: ThrottleGate | None = None,
) -> Attempt:
    """Call ``attempt(remaining_seconds)`` until it succeeds, gives up, or time runs out;
    the last outcome (``ok`` False and retryable when time ran out before an answer)."""
    deadline = time.monotonic() + timeout_s
    last = _NOT_YET
    for retry in range(MAX_ATTEMPTS):
        if gate is not None and not gate.wait(deadline, stop):
            return Attempt(ok=False, retryable=True, code=THROTTLED)
        remaining = deadline - time.monotonic()
        if remaining <= 0 or stop.is_set():
            return last
        last = attempt(remaining)
        if not last.ok and last.delay_s is not None and gate is not None:
            gate.hold(last.delay_s, last.code)  # also when this was the last try
        if last.ok or not last.retryable or retry + 1 == MAX_ATTEMPTS:
            return last
        if last.delay_s is not None and gate is not None:
            continue  # the gate does the waiting (and fails at once past the deadline)
        delay = last.delay_s if last.delay_s is not None else backoff_s(retry)
        if delay >= deadline - time.monotonic():
            return last
        if stop.wait(delay):
            return last
    return last
