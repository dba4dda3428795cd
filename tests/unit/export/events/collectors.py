"""A collector that takes every event, for tests of the event pusher's own machinery."""

from __future__ import annotations

from collections.abc import Sequence

from gpu_otel_agent.export.otlp.retry import Attempt
from gpu_otel_agent.gpu_health.events import HealthEvent


class Accepting:
    """Accepts everything; ``accepted`` holds the events' times in arrival order."""

    def __init__(self) -> None:
        self.accepted: list[int] = []

    def send(self, events: Sequence[HealthEvent]) -> Attempt:
        self.accepted.extend(e.time_ns for e in events)
        return Attempt(ok=True)

    def shutdown(self) -> None:
        return None
