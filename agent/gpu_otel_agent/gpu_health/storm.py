"""Storm control: the first occurrence goes out at once, repeats are summarised with counts.

Per key (GPU, event, code) a window opens at the first occurrence, which is emitted. Repeats
inside the window are only counted; when the window ends with a count, one summary is due and
a new window starts, so a storm that lasts yields one summary per window. A key quiet for a
whole window is forgotten and its next occurrence is again emitted at once. The number of keys
is bounded: past it, new keys fold into one overflow key per GPU.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

MAX_KEYS = 4096


@dataclass
class _Window:
    start: float
    suppressed: int = 0


@dataclass(frozen=True)
class Summary:
    key: Hashable
    count: int  # occurrences suppressed in the window


class StormControl:
    def __init__(self, window_s: float, max_keys: int = MAX_KEYS) -> None:
        self.window_s = window_s
        self._max_keys = max_keys
        self._windows: dict[Hashable, _Window] = {}

    def admit(self, key: Hashable, now: float) -> bool:
        """True: emit this occurrence now. False: it was counted into the key's summary."""
        window = self._windows.get(key)
        if window is None or (now - window.start >= self.window_s and not window.suppressed):
            if window is None and len(self._windows) >= self._max_keys:
                self._prune(now)
                if len(self._windows) >= self._max_keys:
                    return False  # counted nowhere but in the caller's counters
            self._windows[key] = _Window(now)
            return True
        window.suppressed += 1
        return False

    def suppressed(self, key: Hashable) -> int:
        """Occurrences of ``key`` counted in its current window so far."""
        window = self._windows.get(key)
        return 0 if window is None else window.suppressed

    def due(self, now: float) -> list[Summary]:
        """Summaries of the windows that have ended with suppressed occurrences."""
        out = []
        for key, window in self._windows.items():
            if window.suppressed and now - window.start >= self.window_s:
                out.append(Summary(key, window.suppressed))
                window.start = now
                window.suppressed = 0
        self._prune(now)
        return out

    def next_due(self) -> float | None:
        """When the earliest window holding suppressed occurrences ends; None when none does
        (the summariser then sleeps until an occurrence is suppressed, not on a tick)."""
        starts = [w.start for w in self._windows.values() if w.suppressed]
        return min(starts) + self.window_s if starts else None

    def pending(self) -> list[Summary]:
        """Everything still counted (at shutdown, so no count is lost)."""
        out = [Summary(k, w.suppressed) for k, w in self._windows.items() if w.suppressed]
        for window in self._windows.values():
            window.suppressed = 0
        return out

    def _prune(self, now: float) -> None:
        stale = [k for k, w in self._windows.items()
                 if not w.suppressed and now - w.start >= self.window_s]
        for key in stale:
            del self._windows[key]
