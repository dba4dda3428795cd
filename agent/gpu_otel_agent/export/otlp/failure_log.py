"""Why exports fail, at WARNING, without flooding the log.

A collector that is away fails every export, and every retry, for as long as it is away: one
line per failure would bury everything else, and "export failed" alone sends the operator to
debug logging. So each transport (one signal, one endpoint) keeps one of these: a failure is
logged with the endpoint and its cause when the cause differs from the one last logged (no
more often than ``min_gap_s``: a cause that flips back and forth is logged once per gap), a
cause that persists is repeated every ``remind_s`` with the count since, and the first success
after a failure is logged at INFO.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

log = logging.getLogger("gpu_otel_agent.export")

MIN_GAP_S = 30.0
REMIND_S = 600.0


class FailureLog:
    def __init__(self, what: str, endpoint: str, *, min_gap_s: float = MIN_GAP_S,
                 remind_s: float = REMIND_S,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._what = what  # "OTLP/gRPC metrics export", ...
        self._endpoint = endpoint
        self._min_gap_s = min_gap_s
        self._remind_s = remind_s
        self._clock = clock
        self._lock = threading.Lock()
        self._logged: str | None = None  # the cause last logged; None: not failing
        self._logged_at = 0.0
        self._since = 0  # failures since the last line

    def failed(self, cause: str, fix: str | None = None) -> None:
        with self._lock:
            now = self._clock()
            self._since += 1
            changed = cause != self._logged
            due = now - self._logged_at >= (self._min_gap_s if changed else self._remind_s)
            if self._logged is not None and not due:
                return
            again = "" if changed else f" (still; {self._since} failures since the last report)"
            hint = f" -> {fix}" if fix else ""
            log.warning("%s to %s failing: %s%s%s", self._what, self._endpoint, cause, hint,
                        again)
            self._logged, self._logged_at, self._since = cause, now, 0

    def succeeded(self) -> None:
        with self._lock:
            if self._logged is None:
                return
            log.info("%s to %s recovered", self._what, self._endpoint)
            self._logged, self._since = None, 0
