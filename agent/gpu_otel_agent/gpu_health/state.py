"""The health state of one GPU: the worst of the conditions currently holding on it.

A condition is a named cause (``lost``, ``unresponsive``, ``xid:79``, ``row_remap_failure``)
with the state it implies. Transient causes clear when their source says so (a hung call
returns, a lost GPU answers again); conditions left by an XID or an uncorrectable ECC error
hold until the GPU comes back from a reset or loss, because only a reset clears them on the
hardware too.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_otel_agent.model.snapshot import HealthState, worst

# Causes a GPU reset (lost -> back) clears.
STICKY_PREFIXES = ("xid:", "ecc:", "mem:", "recovery_action")


@dataclass(frozen=True)
class Transition:
    previous: HealthState
    current: HealthState
    reason: str


class HealthMachine:
    def __init__(self) -> None:
        self._conditions: dict[str, tuple[HealthState, str]] = {}

    @property
    def state(self) -> HealthState:
        return worst(*(state for state, _ in self._conditions.values()))

    def causes(self) -> tuple[tuple[str, HealthState, str], ...]:
        """Every cause held now, with the state it implies and its reason."""
        return tuple((cause, state, reason)
                     for cause, (state, reason) in self._conditions.items())

    def holds(self, cause: str) -> bool:
        return cause in self._conditions

    def set(self, cause: str, state: HealthState, reason: str) -> Transition | None:
        if state is HealthState.OK:
            return self.clear(cause, reason)
        before = self.state
        self._conditions[cause] = (state, reason)
        return self._transition(before, reason)

    def clear(self, cause: str, reason: str) -> Transition | None:
        before = self.state
        if self._conditions.pop(cause, None) is None:
            return None
        return self._transition(before, reason)

    def reset(self, reason: str) -> Transition | None:
        """The GPU came back from a reset or loss: sticky conditions go with it."""
        before = self.state
        for cause in [c for c in self._conditions if c.startswith(STICKY_PREFIXES)]:
            del self._conditions[cause]
        return self._transition(before, reason)

    def _transition(self, before: HealthState, reason: str) -> Transition | None:
        after = self.state
        if after is before:
            return None
        if after is not HealthState.OK:
            # Name what holds the GPU down, which may not be the cause that just changed.
            reason = next(r for s, r in reversed(self._conditions.values()) if s is after)
        return Transition(before, after, reason)
