"""NVML call counts from the simulated node, over windows aligned on sampling cycles.

The node counts calls of every client together, so exactly one client runs while we measure.
A window starts just after a cycle's burst of calls and ends just after the burst ``cycles``
intervals later: it then holds exactly ``cycles`` cycles, with no ±1 cycle error at the edges
(which at 10 s sampling over two minutes would be ±8 %). Groups on slower intervals that divide
the window (slow 30 s, gpm 10 s) are counted exactly too, since their bursts coincide with fast
ones at the same edges.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.stats import per_device

POLL_S = 0.02
# The health events' waiting threads block in these (with a 200 ms timeout) all the time; a
# wait is not a reading and costs nothing while nothing happens, so sampling counts leave
# them out (otherwise calls would never go quiet between cycles).
EVENT_WAITS = frozenset({"nvmlEventSetWait_v2", "nvmlEventSetWait",
                         "amdsmi_get_gpu_event_notification"})


@dataclass(frozen=True)
class CallCounts:
    """function -> calls (all devices, plus calls without a device), and device -> function."""

    total: Mapping[str, int]
    per_device: Mapping[str, Mapping[str, int]] = field(default_factory=dict)

    @classmethod
    def read(cls, node: SimulatedNode) -> CallCounts:
        stats = node.stats()
        calls = stats["calls"]
        assert isinstance(calls, Mapping)
        return cls({str(k): int(v) for k, v in calls.items() if k not in EVENT_WAITS},
                   per_device(stats))

    def minus(self, before: CallCounts) -> CallCounts:
        total = {f: n - before.total.get(f, 0) for f, n in self.total.items()}
        devices: dict[str, dict[str, int]] = {}
        for device, calls in self.per_device.items():
            old = before.per_device.get(device, {})
            devices[device] = {f: n - old.get(f, 0) for f, n in calls.items() if n - old.get(f, 0)}
        return CallCounts({f: n for f, n in total.items() if n}, devices)

    @property
    def calls(self) -> int:
        return sum(self.total.values())


def settle(node: SimulatedNode, quiet_s: float, timeout: float = 30) -> CallCounts:
    """Counts once no call has arrived for ``quiet_s`` (the burst in progress has ended)."""
    deadline = time.monotonic() + timeout
    last = CallCounts.read(node)
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(POLL_S)
        now = CallCounts.read(node)
        if now.total != last.total:
            last, quiet_since = now, time.monotonic()
        elif time.monotonic() - quiet_since >= quiet_s:
            return now
    raise TimeoutError(f"NVML calls did not stop for {quiet_s}s within {timeout}s")


def after_next_burst(
    node: SimulatedNode, quiet_s: float, timeout: float = 60
) -> tuple[float, CallCounts]:
    """Wait for the client's next burst of calls; returns (when it began, counts after it)."""
    reference = CallCounts.read(node).total
    deadline = time.monotonic() + timeout
    while CallCounts.read(node).total == reference:
        if time.monotonic() > deadline:
            raise TimeoutError(f"no NVML call within {timeout}s")
        time.sleep(POLL_S)
    began = time.monotonic() - POLL_S / 2
    return began, settle(node, quiet_s)


def per_gpu_per_cycle(calls: CallCounts, gpus: int, cycles: int) -> dict[str, float]:
    """function -> calls per GPU per cycle, for the report's breakdown."""
    if cycles <= 0 or gpus <= 0:
        return {}
    return {f: round(n / gpus / cycles, 3) for f, n in sorted(calls.total.items())}
