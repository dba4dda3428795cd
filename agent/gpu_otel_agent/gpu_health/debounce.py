"""Debounce: a condition is raised after N bad evaluations in a row and cleared after M good.

Hysteresis (a clear threshold on the safe side of the raise threshold) is each condition's own
business (``gray.py``); this is the time half: one reading over the line neither raises nor
clears. An evaluation that cannot tell (the GPU is idle, a reading is absent) counts for
neither side and breaks no run, so an idle spell does not clear a link that trained down.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DebounceSettings:
    degrade_after: int = 3  # consecutive bad evaluations (slow cycles) before raising
    clear_after: int = 3  # consecutive good evaluations before clearing

    def __post_init__(self) -> None:
        if self.degrade_after < 1 or self.clear_after < 1:
            raise ValueError("degrade_after and clear_after must be >= 1")


class Debounce:
    """One condition on one GPU."""

    def __init__(self, settings: DebounceSettings) -> None:
        self._settings = settings
        self.active = False
        self._run = 0  # evaluations in a row that disagree with ``active``

    def observe(self, bad: bool | None) -> bool | None:
        """Feed one evaluation; returns the new state when it flips, else None."""
        if bad is None:
            return None
        if bad == self.active:
            self._run = 0
            return None
        self._run += 1
        needed = self._settings.clear_after if self.active else self._settings.degrade_after
        if self._run < needed:
            return None
        self.active, self._run = bad, 0
        return bad
