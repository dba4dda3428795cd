"""The recent health events a local client may read: a bounded ring with sequence numbers.

The health engine's sink feeds it on the event loop (one ``append`` per delivered event); the
local endpoint reads it on its own thread. Each event gets the next sequence number, so a client
that last saw ``n`` asks for what is newer and learns when the ring dropped some in between.
"""

from __future__ import annotations

import threading
from collections import deque
from dataclasses import dataclass

from gpu_otel_agent.gpu_health.events import HealthEvent


@dataclass(frozen=True)
class Numbered:
    seq: int  # 1, 2, ... in delivery order; never reused while the agent runs
    event: HealthEvent


@dataclass(frozen=True)
class Recent:
    """The events after a client's sequence number that the ring still holds."""

    events: tuple[Numbered, ...]
    last_seq: int  # the newest number handed out (0: none yet)
    missed: int  # events after the client's number that the ring no longer holds


class EventRing:
    def __init__(self, capacity: int) -> None:
        if capacity < 1:
            raise ValueError(f"an event ring needs room for one event, got {capacity}")
        self._lock = threading.Lock()
        self._ring: deque[Numbered] = deque(maxlen=capacity)
        self._seq = 0

    def append(self, event: HealthEvent) -> None:
        with self._lock:
            self._seq += 1
            self._ring.append(Numbered(self._seq, event))

    def after(self, seq: int) -> Recent:
        with self._lock:
            events = tuple(n for n in self._ring if n.seq > seq)
            last = self._seq
        first_kept = events[0].seq if events else last + 1
        return Recent(events, last, max(first_kept - max(seq, 0) - 1, 0))
