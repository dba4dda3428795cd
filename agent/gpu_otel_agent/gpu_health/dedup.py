"""One fault seen by two channels (NVML and the kernel log) is reported once.

Each occurrence from one source waits, for ``window_s`` seconds, to be matched by the same
(GPU, code) from another source; a match is the same fault and is dropped. Repeats from the
same source are real repeats and never match each other.

A ``wildcard`` code stands for any code: NVML reports an XID it cannot identify as 999 while
the kernel log names it (``NVRM: Xid ...: 79``). A wildcard occurrence is dropped when another
source's XID of that GPU (any code) came within the window; an occurrence with a code after a
wildcard one is still reported (it names the fault: dropping a 79 for a 999 would hide a lost
GPU) and uses the wildcard up, so the pair costs one extra event at most, never two.
"""

from __future__ import annotations

from collections import deque

MAX_UNMATCHED = 1024  # per (GPU, code, source): bounds memory in a one-sided storm


class CrossSourceDedup:
    def __init__(self, window_s: float, wildcard: int | None = None) -> None:
        self.window_s = window_s
        self.wildcard = wildcard
        # (GPU, code) -> source -> times of occurrences not yet matched by another source
        self._unmatched: dict[tuple[str, int], dict[str, deque[float]]] = {}

    def _take(self, key: tuple[str, int], source: str, now: float) -> bool:
        """Use up another source's unmatched occurrence of ``key`` within the window."""
        for other, times in self._unmatched.get(key, {}).items():
            if other == source:
                continue
            while times and now - times[0] > self.window_s:
                times.popleft()
            if times:
                times.popleft()
                return True
        return False

    def is_duplicate(self, uuid: str, code: int, source: str, now: float) -> bool:
        if self.wildcard is not None and code == self.wildcard:
            if any(self._take(key, source, now) for key in list(self._unmatched)
                   if key[0] == uuid):
                return True
        elif self._take((uuid, code), source, now):
            return True
        elif self.wildcard is not None:
            self._take((uuid, self.wildcard), source, now)  # reported, and the 999 used up
        by_source = self._unmatched.setdefault((uuid, code), {})
        mine = by_source.setdefault(source, deque(maxlen=MAX_UNMATCHED))
        while mine and now - mine[0] > self.window_s:
            mine.popleft()
        mine.append(now)
        return False
