"""What /readyz and /healthz answer, from the snapshot alone.

Ready: every device has been sampled once or found unhealthy (``SnapshotStore.covers``, the
same test the first OTLP export waits for), so a scrape never sees a half-empty node.

Healthy: every device that is ``ok`` has a sample newer than ``stall_after``. A lost or hung
GPU is reported by the agent (``hw.status``), not a reason to restart it; a stalled event
loop or a dead sampling task is, and it shows as samples that stop getting newer.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.model.snapshot import HealthState, SnapshotStore

MIN_STALL_SECONDS = 10.0


@dataclass(frozen=True)
class Verdict:
    ok: bool
    reason: str


def stall_after(config: AgentConfig) -> float:
    """Configured, or three of the shortest enabled group intervals plus the call deadline."""
    if config.prometheus.stall_after is not None:
        return config.prometheus.stall_after
    intervals = [g.interval for g in config.groups.values() if g.enabled]
    if not intervals:
        return float("inf")
    return max(3 * min(intervals) + config.call_timeout, MIN_STALL_SECONDS)


class HealthCheck:
    def __init__(
        self,
        store: SnapshotStore,
        device_count: int,
        config: Callable[[], AgentConfig],
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self._store = store
        self._device_count = device_count
        self._config = config
        self._clock_ns = clock_ns
        self._started_ns = clock_ns()

    def ready(self) -> Verdict:
        if self._store.covers(self._device_count):
            return Verdict(True, "ready")
        return Verdict(False, "waiting for the first sample of every GPU")

    def healthy(self) -> Verdict:
        now = self._clock_ns()
        limit = stall_after(self._config())
        stalled = []
        for device in self._store.devices():
            if device.health is not HealthState.OK:
                continue
            if device.samples:
                newest = max(s.time_ns for s in device.samples.values())
            else:
                newest = self._started_ns  # never sampled: count from start-up
            age = (now - newest) / 1e9
            if age > limit:
                stalled.append(f"gpu {device.identity.index}: no sample for {age:.1f}s")
        if stalled:
            return Verdict(False, "sampling stalled: " + "; ".join(stalled))
        return Verdict(True, "ok")
