"""One gate per collector endpoint: a delay the collector asked for holds every sender to it.

A collector that is overloaded says so: gRPC ``RESOURCE_EXHAUSTED`` or ``UNAVAILABLE`` with a
``google.rpc.RetryInfo``, HTTP 429 or 503 with ``Retry-After``. The OTLP specification asks
the client to wait that long before it sends again (https://opentelemetry.io/docs/specs/otlp/
#otlpgrpc-throttling). The agent sends to one collector from two places (the metric exports
and the health events' sender), each with its own retries: a delay honoured only inside the
retries of one request did not stop the next interval's export nor the other signal (issue 30:
against a 30 s delay, 20-40 metric and 9-15 log requests went out in 40 s). So the delay is
held here, per endpoint, and every send to that endpoint waits for the gate first; a send
whose own deadline ends before the gate opens fails at once without touching the network (the
caller's back-off, the spool and the next interval carry the data).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

# A collector's delay is honoured up to this; a larger one (a bug, a hostile peer) is cut.
MAX_DELAY_S = 300.0


@dataclass
class ThrottleStats:
    throttled: dict[str, int] = field(default_factory=dict)  # answers that named a delay
    held: int = 0  # sends not made because the gate was closed past their deadline
    waited_s: float = 0.0  # time sends spent waiting at the gate


class ThrottleGate:
    """The earliest time the next request to one endpoint may go out."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._open_at = 0.0
        self.stats = ThrottleStats()

    def hold(self, delay_s: float, code: str) -> None:
        """The collector asked (answering with ``code``) for ``delay_s`` seconds of quiet."""
        delay_s = min(max(delay_s, 0.0), MAX_DELAY_S)
        with self._lock:
            self._open_at = max(self._open_at, self._clock() + delay_s)
            self.stats.throttled[code] = self.stats.throttled.get(code, 0) + 1

    def remaining_s(self) -> float:
        with self._lock:
            return max(0.0, self._open_at - self._clock())

    def wait(self, deadline: float, stop: threading.Event) -> bool:
        """Wait until the gate opens; False (nothing waited) when it opens after
        ``deadline`` (a ``time.monotonic`` value) or ``stop`` is set meanwhile."""
        if self._open_at <= self._clock():
            # Open (the common case), read without the lock: a float attribute is read whole,
            # and a hold racing this read holds the next request, as it would a moment later.
            return True
        while True:
            remaining = self.remaining_s()
            if remaining <= 0:
                return True
            if self._clock() + remaining >= deadline:
                with self._lock:
                    self.stats.held += 1
                return False
            started = self._clock()
            stopped = stop.wait(remaining)
            with self._lock:
                self.stats.waited_s += self._clock() - started
            if stopped:
                return False


_GATES: dict[str, ThrottleGate] = {}
_GATES_LOCK = threading.Lock()


def gate_for(endpoint: str) -> ThrottleGate:
    """The gate of the collector at ``endpoint`` (``host:port``), shared by every sender."""
    with _GATES_LOCK:
        gate = _GATES.get(endpoint)
        if gate is None:
            gate = _GATES[endpoint] = ThrottleGate()
        return gate


def gates() -> dict[str, ThrottleGate]:
    with _GATES_LOCK:
        return dict(_GATES)
