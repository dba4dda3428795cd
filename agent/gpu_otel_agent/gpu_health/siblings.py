"""Siblings: a GPU that is slower (or draws odd power) next to GPUs of its own model.

Eight identical GPUs under the same job should run at about the same SM clock and power; one
that does not is degrading even when each of its readings looks plausible alone. A GPU is
compared with the median of the other busy GPUs of its model on the node, at comparable
utilization, and only when there are at least two of them (a pair cannot say which is odd).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpu_otel_agent.gpu_health import subsystems as sub
from gpu_otel_agent.gpu_health.gray import BUSY, Verdict

MIN_PEERS = 2  # other busy GPUs of the same model needed to judge one


def peers_median(values: Iterable[float]) -> float:
    """``statistics.median``'s answer (the middle value, or the mean of the two middle ones),
    for the at least ``MIN_PEERS`` values this module passes: the statistics module brings
    fractions and decimal with it, 0.45 MiB of the running agent for one function (issue 41;
    tests/unit/gpu_health/test_siblings_median.py compares the two)."""
    data = sorted(values)
    n = len(data)
    if n == 0:
        raise ValueError("no median for no data")
    if n % 2:
        return data[n // 2]
    return (data[n // 2 - 1] + data[n // 2]) / 2
UTIL_SPREAD = 0.15  # "comparable utilization": within this of the peers' median
CLOCK_LOW, CLOCK_CLEAR = 0.85, 0.92  # of the peers' median SM clock
POWER_OFF, POWER_CLEAR = 0.25, 0.15  # relative distance from the peers' median power


@dataclass(frozen=True)
class Peer:
    """What is compared, from a GPU's latest fast read."""

    model: str
    utilization: float | None
    sm_clock: float | None  # Hz
    power: float | None  # W


@dataclass(frozen=True)
class SiblingSpec:
    name: str
    subsystem: str
    what: str
    threshold: str
    why: str
    source: str


SIBLING_CONDITIONS = (
    SiblingSpec("sibling_sm_clock", sub.SM, "SM clock an outlier against same-model GPUs",
                "busy, and SM clock < 85 % of the median of >= 2 other busy GPUs of the model "
                "within 15 utilization points (clears at 92 %)",
                "The slow GPU of eight sets the pace of a synchronous training step; the "
                "issue's \"simply slower than its seven siblings\".",
                "gpu.clock.frequency{sm}, hw.gpu.utilization (fast group)"),
    SiblingSpec("sibling_power", sub.POWER, "Power an outlier against same-model GPUs",
                "busy, and power more than 25 % from the median of >= 2 other busy GPUs of the "
                "model within 15 utilization points (clears within 15 %)",
                "Same work, different power: a power-delivery or cooling difference the "
                "GPU's own limits do not flag.", "hw.power, hw.gpu.utilization (fast group)"),
)


def _comparable(gpu: Peer, others: list[Peer]) -> list[Peer] | None:
    if gpu.utilization is None or gpu.utilization < BUSY:
        return None
    busy = [p for p in others if p.model == gpu.model and p.utilization is not None
            and p.utilization >= BUSY]
    if len(busy) < MIN_PEERS:
        return None
    util = peers_median(p.utilization for p in busy if p.utilization is not None)
    if abs(gpu.utilization - util) > UTIL_SPREAD:
        return None
    return busy


def _against_peers(gpu: Peer, others: list[Peer],
                   value: Callable[[Peer], float | None]) -> tuple[float, float, int] | None:
    """The GPU's value, the median of its comparable peers' (positive) and how many there
    were; None when there is nothing to compare."""
    mine = value(gpu)
    theirs = [v for p in _comparable(gpu, others) or () if (v := value(p)) is not None]
    if mine is None or len(theirs) < MIN_PEERS:
        return None
    median = peers_median(theirs)
    return (mine, median, len(theirs)) if median > 0 else None


def sm_clock(gpu: Peer, others: list[Peer], active: bool) -> Verdict:
    found = _against_peers(gpu, others, lambda p: p.sm_clock)
    if found is None:
        return Verdict(None)
    clock, median, count = found
    ratio = clock / median
    return Verdict(ratio < (CLOCK_CLEAR if active else CLOCK_LOW),
                   f"SM clock {clock / 1e6:.0f} MHz is {ratio:.0%} of the median "
                   f"{median / 1e6:.0f} MHz of {count} busy {gpu.model} siblings")


def power(gpu: Peer, others: list[Peer], active: bool) -> Verdict:
    found = _against_peers(gpu, others, lambda p: p.power)
    if found is None:
        return Verdict(None)
    watts, median, count = found
    off = abs(watts - median) / median
    return Verdict(off > (POWER_CLEAR if active else POWER_OFF),
                   f"power {watts:.0f} W is {off:.0%} from the median {median:.0f} W of "
                   f"{count} busy {gpu.model} siblings")
