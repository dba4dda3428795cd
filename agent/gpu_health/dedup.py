"""One fault seen by two channels (NVML and the kernel log) is reported once.

Each occurrence from one source waits, for ``window_s`` seconds, to be matched by the same
(GPU, code) from another source; a match is the same fault and is dropped. Repeats from the
same source are real repeats and never match each other.
"""

from __future__ import annotations

from collections import deque

MAX_UNMATCHED = 1024  # per (GPU, code, source): bounds memory in a one-sided storm


class CrossSourceDedup:
    def __init__(self, window_s: float) -> None:
        self.window_s = window_s
        # (GPU, code) -> source -> times of occurrences not yet matched by another source
        self._unmatched: dict[tuple[str, int], dict[str, deque[float]]] = {}

    def is_duplicate(self, uuid: str, code: int, source: str, now: float) -> bool:
        by_source = self._unmatched.setdefault((uuid, code), {})
        for other, times in by_source.items():
            if other == source:
                continue
            while times and now - times[0] > self.window_s:
                times.popleft()
            if times:
                times.popleft()
                return True
        mine = by_source.setdefault(source, deque(maxlen=MAX_UNMATCHED))
        while mine and now - mine[0] > self.window_s:
            mine.popleft()
        mine.append(now)
        return False
