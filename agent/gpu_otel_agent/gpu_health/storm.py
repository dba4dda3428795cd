"""Storm control: the first occurrence goes out at once, repeats are summarised with counts.

Per key (:class:`StormKey`: the GPU, the event, what tells repeats apart, the partition it is
about) a window opens at the first occurrence, which is emitted. Repeats inside the window are
only counted; when the window ends with a count, one summary is due and a new window starts, so
a storm that lasts yields one summary per window. A key quiet for a whole window is forgotten
and its next occurrence is again emitted at once. The number of keys is bounded: past it, new
occurrences are counted only in the caller's counters.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MAX_KEYS = 4096


class BadStormKey(ValueError):
    """A stored key that is not one (a journal line from elsewhere)."""


@dataclass(frozen=True)
class StormKey:
    """What repeats are counted under. Named fields, never read by position: the physical
    GPU comes first whatever the event is scoped to, so a storm on a MIG instance is found
    among the GPUs when its summary is due (and after a restart)."""

    gpu: str  # the physical GPU's UUID: its events, counters and health
    event: str  # the event name (gpu.xid, gpu.ecc, ...)
    code: int | None = None  # the XID code
    qualifier: str = ""  # what else tells repeats apart: ECC error type, throttle reason/state
    scope: str = ""  # the partition (MIG instance UUID) the occurrences are about; "": the GPU
    # A link fault as the kernel log's line says it (NVLink XIDs 144-150, SXIDs): a fatal one
    # is never folded into a storm of non-fatal ones, nor one link's into another's.
    fatal: bool | None = None
    link: int | None = None

    def to_json(self) -> dict[str, object]:
        return {"gpu": self.gpu, "event": self.event, "code": self.code,
                "qualifier": self.qualifier, "scope": self.scope, "fatal": self.fatal,
                "link": self.link}

    @classmethod
    def from_json(cls, raw: object) -> StormKey:
        """A key as :meth:`to_json` wrote it."""
        if not isinstance(raw, Mapping):
            raise BadStormKey(f"expected an object, got {raw!r}")
        gpu, event, code = raw.get("gpu"), raw.get("event"), raw.get("code")
        qualifier, scope = raw.get("qualifier", ""), raw.get("scope", "")
        if not (isinstance(gpu, str) and isinstance(event, str) and isinstance(qualifier, str)
                and isinstance(scope, str)):
            raise BadStormKey(f"gpu, event, qualifier and scope must be strings: {raw!r}")
        fatal, link = raw.get("fatal"), raw.get("link")
        for name, value in (("code", code), ("link", link)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise BadStormKey(f"{name} must be an integer: {raw!r}")
        if fatal is not None and not isinstance(fatal, bool):
            raise BadStormKey(f"fatal must be true or false: {raw!r}")
        return cls(gpu, event, code, qualifier, scope, fatal, link)


@dataclass
class _Window:
    start: float
    suppressed: int = 0


@dataclass(frozen=True)
class Summary:
    key: StormKey
    count: int  # occurrences suppressed in the window


class StormControl:
    def __init__(self, window_s: float, max_keys: int = MAX_KEYS) -> None:
        self.window_s = window_s
        self._max_keys = max_keys
        self._windows: dict[StormKey, _Window] = {}

    def admit(self, key: StormKey, now: float) -> bool:
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

    def suppressed(self, key: StormKey) -> int:
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
