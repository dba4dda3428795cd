"""Process-wide logging setup: one line per event, level from the configuration."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

# The OTLP exporter logs an error for every failed export; while a collector is down that is
# one identical line per export interval. One per message per this many seconds is enough.
EXPORTER_LOG_PERIOD_SECONDS = 60.0


class RateLimit(logging.Filter):
    """Lets one record per message template through per period; counts what it held back.

    Only records of loggers under ``prefix`` are limited. It sits on the handlers, because a
    filter on a parent logger never sees what its child loggers propagate.
    """

    def __init__(
        self, period: float, prefix: str = "", clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__()
        self._prefix = prefix
        self._period = period
        self._clock = clock
        self._last: dict[object, float] = {}
        self._held: dict[object, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.name.startswith(self._prefix):
            return True
        now = self._clock()
        last = self._last.get(record.msg)
        if last is not None and now - last < self._period:
            self._held[record.msg] = self._held.get(record.msg, 0) + 1
            return False
        self._last[record.msg] = now
        held = self._held.pop(record.msg, 0)
        if held:
            record.msg = f"{record.msg} ({held} similar messages suppressed)"
        return True


def setup_logging(level: str) -> None:
    logging.basicConfig(
        level=level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    exporters = "opentelemetry.exporter.otlp"
    logging.getLogger(exporters).setLevel(logging.ERROR)  # its per-retry warnings say nothing new
    limit = RateLimit(EXPORTER_LOG_PERIOD_SECONDS, prefix=exporters)
    for handler in logging.getLogger().handlers:
        handler.addFilter(limit)
