"""Health the hardware has no event for, turned into transitions from slow-group readings.

Throttle reasons (thermal / power slowdowns) give start and end; a violation counter that grew
while no matching reason was seen at either read is a slowdown shorter than the read interval
(``transient``). Retired pages pending and a row-remap failure are conditions that hold while
their gauge is 1.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_otel_agent.model.snapshot import Reading

# Clock-event reasons that mean the GPU is held back (idle or application clocks are not).
SLOWDOWN_REASONS = frozenset({
    "sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown",
    "hw_power_brake_slowdown", "board_limit", "reliability",
    # AMD (amdsmi violation status)
    "ppt_power", "socket_thermal", "vr_thermal", "hbm_thermal", "prochot",
})
# Violation policy -> the reasons that explain time counted against it.
_POLICY_REASONS = {
    "power": frozenset({"sw_power_cap", "hw_power_brake_slowdown", "hw_slowdown"}),
    "thermal": frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown", "hw_slowdown"}),
}
CONDITIONS = {
    "gpu.memory.page_retirement.pending": ("retired_pages_pending",
                                         "retired pages pending (reset the GPU to retire them)"),
    "gpu.memory.row_remap.failure": ("row_remap_failure", "row remapping failed"),
    "gpu.memory.row_remap.pending": ("row_remap_pending",
                                     "remapped rows pending (reset the GPU to remap them)"),
}


@dataclass(frozen=True)
class Throttle:
    reason: str
    state: str  # start / end / transient
    seconds: float = 0.0  # for transient: violation time counted between the reads


@dataclass(frozen=True)
class Condition:
    cause: str
    active: bool
    reason: str


class PolledWatcher:
    """One GPU's previous slow reading, to compare the next one with."""

    def __init__(self) -> None:
        self._throttling: dict[str, bool] = {}
        self._violation: dict[str, float] = {}
        self._conditions: dict[str, bool] = {}

    def update(self, readings: tuple[Reading, ...]) -> tuple[list[Throttle], list[Condition]]:
        throttles: list[Throttle] = []
        conditions: list[Condition] = []
        reasons: dict[str, bool] = {}
        violation: dict[str, float] = {}
        for reading in readings:  # the whole slow group: build no dict for other metrics
            if reading.metric == "gpu.clock.throttle":
                reason = str(dict(reading.attributes).get("gpu.clock.throttle.reason", ""))
                if reason in SLOWDOWN_REASONS:
                    reasons[reason] = bool(reading.value)
            elif reading.metric == "gpu.violation.time":
                policy = str(dict(reading.attributes).get("gpu.violation.policy", ""))
                if policy in _POLICY_REASONS:
                    violation[policy] = float(reading.value)
            elif reading.metric in CONDITIONS:
                cause, text = CONDITIONS[reading.metric]
                active = bool(reading.value)
                if self._conditions.get(cause, False) != active:
                    conditions.append(Condition(cause, active, text))
                self._conditions[cause] = active
        for reason, active in sorted(reasons.items()):
            was = self._throttling.get(reason, False)
            if active != was:
                throttles.append(Throttle(reason, "start" if active else "end"))
        for policy, seconds in sorted(violation.items()):
            before = self._violation.get(policy)
            explained = any(reasons.get(r) or self._throttling.get(r)
                            for r in _POLICY_REASONS[policy])
            if before is not None and seconds > before and not explained:
                throttles.append(Throttle(f"{policy}_violation", "transient", seconds - before))
        self._throttling.update(reasons)
        self._violation.update(violation)
        return throttles, conditions
