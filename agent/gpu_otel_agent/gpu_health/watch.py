"""One GPU's gray-failure conditions over time: evaluate, debounce, report what flipped."""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

from gpu_otel_agent.gpu_health import siblings
from gpu_otel_agent.gpu_health.debounce import Debounce, DebounceSettings
from gpu_otel_agent.gpu_health.gray import CONDITIONS, RATE_METRICS, Reads, Verdict
from gpu_otel_agent.model.snapshot import Reading

_SIBLING_EVALUATORS = {"sibling_sm_clock": siblings.sm_clock, "sibling_power": siblings.power}


@dataclass(frozen=True)
class Change:
    condition: str
    subsystem: str
    active: bool  # raised (gpu.degraded) or cleared (gpu.healthy)
    reason: str


class GrayWatch:
    def __init__(self, settings: DebounceSettings) -> None:
        names = [c.name for c in CONDITIONS] + [s.name for s in siblings.SIBLING_CONDITIONS]
        self._debounce = {name: Debounce(settings) for name in names}
        self._reasons: dict[str, str] = {}  # what raised a condition, named again at clear
        # Earlier reads, as many as the debounce window: counter rates are taken against the
        # oldest, so a rate raises as one window (DCGM's health watches use one minute).
        self._history: deque[Reads] = deque(maxlen=settings.degrade_after)

    def active(self) -> dict[str, str]:
        """Raised conditions and the reason each was raised with."""
        return {n: self._reasons.get(n, "") for n, d in self._debounce.items() if d.active}

    def update(self, readings: tuple[Reading, ...], time_s: float, me: siblings.Peer | None,
               others: list[siblings.Peer], instances_load: float | None = None
               ) -> list[Change]:
        reads = Reads(readings, time_s, self._history[0] if self._history else None,
                      instances_load)
        self._history.append(Reads(tuple([r for r in readings if r.metric in RATE_METRICS]),
                                   time_s))
        changes: list[Change] = []
        for spec in CONDITIONS:
            active = self._debounce[spec.name].active
            changes.extend(self._observe(spec.name, spec.subsystem,
                                         spec.evaluate(reads, active)))
        for sib in siblings.SIBLING_CONDITIONS:
            active = self._debounce[sib.name].active
            verdict = (_SIBLING_EVALUATORS[sib.name](me, others, active) if me is not None
                       else Verdict(None))
            changes.extend(self._observe(sib.name, sib.subsystem, verdict))
        return changes

    def _observe(self, name: str, subsystem: str, verdict: Verdict) -> list[Change]:
        flipped = self._debounce[name].observe(verdict.bad)
        if flipped is None:
            return []
        if flipped:
            self._reasons[name] = verdict.detail
            return [Change(name, subsystem, True, verdict.detail)]
        raised = self._reasons.pop(name, "")
        return [Change(name, subsystem, False, raised)]
