"""What the wire can carry: OTLP's integers are signed 64-bit, and nothing else is.

``NumberDataPoint.as_int`` is an ``sfixed64`` and ``AnyValue.int_value`` an ``int64``
(opentelemetry-proto, metrics.proto and common.proto). A GPU library can serve an unsigned
64-bit counter at 2^64-1 (a counter at its limit, or a driver's "unavailable"), and the kernel
log can carry any number of digits: such a value has no encoding, and before this check one
of them made every metric export raise (``struct.error``) until restart.

A reading whose value or an integer attribute is out of range is left out of every exporter
(OTLP and Prometheus see the same series). Each such series (metric and attributes) is counted
once in ``gpu_agent.readings.dropped`` and logged once, however many exports it would have
been part of.
"""

from __future__ import annotations

import logging
import math
import threading

from gpu_otel_agent.model.snapshot import Attributes

log = logging.getLogger(__name__)

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
# Distinct series remembered (for "once"); past this, each drop is counted but not logged.
_MAX_REMEMBERED = 1024



class _Drops:
    """Series dropped so far, for every exporter's thread (one lock, taken only on a drop)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.seen: set[tuple[str, Attributes]] = set()
        self.count = 0


_drops = _Drops()


def out_of_range(value: object) -> bool:
    """An integer (not a bool) the wire's signed 64 bits cannot hold."""
    return (type(value) is int  # a bool is in range, and so is every float the wire sends
            and not INT64_MIN <= value <= INT64_MAX)


def carried(metric: str, value: float | int, attributes: Attributes) -> bool:
    """False (and counted, logged once) when the reading cannot be encoded; also False for
    a value that is not finite (absent, never NaN), which is not counted."""
    if type(value) is int:
        if not INT64_MIN <= value <= INT64_MAX:
            _drop(metric, value, attributes)
            return False
    elif not math.isfinite(value):
        return False
    if any(type(v) is int and not INT64_MIN <= v <= INT64_MAX for _, v in attributes):
        _drop(metric, value, attributes)
        return False
    return True
    _drop(metric, value, attributes)
    return False


def _drop(metric: str, value: float | int, attributes: Attributes) -> None:
    key = (metric, attributes)
    with _drops.lock:
        if key in _drops.seen:
            return
        _drops.count += 1
        if len(_drops.seen) >= _MAX_REMEMBERED:
            return
        _drops.seen.add(key)
    log.warning("%s %s: value %s is outside what OTLP carries (a signed 64-bit integer); "
                "the reading is left out of every export (counted in "
                "gpu_agent.readings.dropped)", metric, dict(attributes), value)


def dropped_readings() -> int:
    """Series dropped so far (``gpu_agent.readings.dropped``)."""
    return _drops.count
