"""``CounterRestarts`` keeps each series' last value and time in a list written in place (one
look-up of a series' key per reading). Over random reads (counters that grow, stay, drop,
come and go, with and without their own times, gauges among them), what it says must be
what the old version (a new pair stored per reading, kept below) says, read after read."""

from __future__ import annotations

import random

from gpu_otel_agent.model.counters import COUNTER_METRICS, CounterKey, CounterRestarts
from gpu_otel_agent.model.snapshot import Reading

COUNTERS = sorted(COUNTER_METRICS)[:5]


class _Old:
    def __init__(self) -> None:
        self.last: dict[CounterKey, tuple[float, int]] = {}
        self.starts: dict[CounterKey, int] = {}
        self.restarts = 0

    def observe(self, readings: tuple[Reading, ...], time_ns: int) -> bool:
        changed = False
        for reading in readings:
            if reading.metric not in COUNTER_METRICS:
                continue
            key = (reading.metric, reading.attributes)
            before = self.last.get(key)
            if before is not None and reading.value < before[0]:
                self.starts[key] = before[1] + 1
                self.restarts += 1
                changed = True
            self.last[key] = (reading.value, reading.time_ns or time_ns)
        return changed


def test_restarts_are_the_old_versions_read_after_read() -> None:
    rng = random.Random(6)
    ours, old = CounterRestarts(5), _Old()
    values: dict[CounterKey, float] = {}
    for step in range(1, 800):
        readings = []
        for metric in rng.sample([*COUNTERS, "hw.power", "hw.temperature"], rng.randrange(8)):
            attributes = (("n", rng.randrange(3)),)
            key = (metric, attributes)
            value = values.get(key, 0.0) + rng.choice((0, 1, 2.5, -3, -100))
            values[key] = value = rng.choice((value, round(value)))
            readings.append(Reading(metric, value, attributes, rng.choice((0, step * 10 - 3))))
        now = step * 10
        assert ours.observe(tuple(readings), now) == old.observe(tuple(readings), now)
        assert ours.starts() == old.starts and ours.restarts == old.restarts
    assert ours.restarts > 100
