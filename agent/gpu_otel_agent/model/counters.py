"""Cumulative counters that go backwards start a new series, never a negative delta.

NVML's energy, volatile ECC and PCIe byte counters restart at 0 on a driver reload or GPU
reset, and PCIe byte fields "can be wrapped" (nvml.h) at a width nvml.h does not give (the
field is served as an unsigned 64-bit value). A reading below the previous one of the same
series is therefore taken as a restart: the series gets a new OTLP start time (just after the
previous point, the last moment the old count was seen), so a consumer computing deltas or
rates starts afresh instead of seeing a negative step. The exported value is what the device
served; nothing is added to "unwrap" it, because the width is unknown.

A restart is seen only as a drop below the last value read: a counter reset that regains its
old value before the next read (a reset right after a read, at a high rate) is missed, and its
series goes on (the deltas across it are too small, never negative).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from gpu_otel_agent.model.metrics import (
    AGENT_METRICS,
    CUDA_METRICS,
    DEVICE_METRICS,
    PROCESS_METRICS,
    Instrument,
)
from gpu_otel_agent.model.snapshot import Attributes, Reading

CounterKey = tuple[str, Attributes]


# The catalog's monotonic cumulative sums (what OTLP marks ``is_monotonic``): ``observe`` looks
# each reading of every group read up here, a set lookup instead of a (cached) call.
COUNTER_METRICS = frozenset(
    spec.name for spec in (*DEVICE_METRICS, *PROCESS_METRICS, *CUDA_METRICS, *AGENT_METRICS)
    if spec.instrument is Instrument.COUNTER)


def is_counter(metric: str) -> bool:
    """A monotonic cumulative sum in the catalog (what OTLP marks ``is_monotonic``)."""
    return metric in COUNTER_METRICS


@dataclass
class CounterRestarts:
    """The last value and the start time of each counter series of one device."""

    default_start_ns: int
    # Each series' last value and time, in a list written in place: a series seen before
    # (nearly every one) costs one look-up of its key, not a look-up and a store, and no
    # new pair (a slow read has 72 counters; the key, two tuples deep, is hashed each time).
    _last: dict[CounterKey, list[float | int]] = field(default_factory=dict)  # value, time
    _starts: dict[CounterKey, int] = field(default_factory=dict)
    restarts: int = 0  # series restarted so far (self-telemetry, tests)

    def observe(self, readings: Iterable[Reading], time_ns: int) -> bool:
        """Note a sample's counter readings; True when a series restarted (starts changed)."""
        changed = False
        counters, last = COUNTER_METRICS, self._last
        for reading in readings:
            if reading.metric not in counters:
                continue
            key = (reading.metric, reading.attributes)
            before = last.get(key)
            if before is None:
                last[key] = [reading.value, reading.time_ns or time_ns]
                continue
            if reading.value < before[0]:
                self._starts[key] = int(before[1]) + 1
                self.restarts += 1
                changed = True
            before[0] = reading.value
            before[1] = reading.time_ns or time_ns
        return changed

    def starts(self) -> Mapping[CounterKey, int]:
        """Series whose start differs from the device's (a copy: the snapshot keeps it)."""
        return dict(self._starts)
