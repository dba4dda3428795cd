"""One measurement window over a long-running NVML client: CPU time and NVML calls."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.bench.calls import CallCounts, after_next_burst
from tests.bench.procstat import cpu_seconds


@dataclass(frozen=True)
class Window:
    seconds: float
    cycles: int
    cpu_s: float
    calls: CallCounts
    wall_start: float  # time.time(), to pick the receiver's requests inside the window
    wall_end: float
    also_cpu_s: tuple[float, ...] = ()  # CPU of the ``also`` processes over the same window

    @property
    def cpu_s_per_min(self) -> float:
        return self.cpu_s / self.seconds * 60

    @property
    def cpu_percent(self) -> float:
        """Percent of one core."""
        return self.cpu_s / self.seconds * 100


def quiet_for(interval: float) -> float:
    # Long enough to see a whole burst end (device threads, psutil work in peers), short
    # enough to stay well inside one interval.
    return min(0.15 * interval, 0.3)


def measure(
    node: SimulatedNode,
    pid: int,
    interval: float,
    cycles: int,
    alive: Callable[[], bool] = lambda: True,
    *,
    also: Sequence[int] = (),
) -> Window:
    """Window from just after one burst to just after the burst ``cycles`` intervals later."""
    quiet = quiet_for(interval)
    began0, before = after_next_burst(node, quiet)
    cpu0, wall0, mono0 = cpu_seconds(pid), time.time(), time.monotonic()
    also0 = [cpu_seconds(other) for other in also]
    # Wake half an interval before the last burst is due, then wait for it to happen.
    wake = began0 + cycles * interval - interval / 2
    while time.monotonic() < wake:
        if not alive():
            raise RuntimeError(f"process {pid} exited during the measurement")
        time.sleep(min(0.5, max(0.0, wake - time.monotonic())))
    began1, after = after_next_burst(node, quiet)
    cpu1, wall1, mono1 = cpu_seconds(pid), time.time(), time.monotonic()
    also1 = [cpu_seconds(other) for other in also]
    return Window(
        seconds=mono1 - mono0,
        cycles=round((began1 - began0) / interval),
        cpu_s=cpu1 - cpu0,
        calls=after.minus(before),
        wall_start=wall0,
        wall_end=wall1,
        also_cpu_s=tuple(b - a for a, b in zip(also0, also1, strict=True)),
    )
