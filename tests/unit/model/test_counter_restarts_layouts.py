"""``CounterRestarts.observe`` looks only at where a sample's layout has its counters: over
samples of changing layouts and values it must restart exactly the series, at exactly the
start times, that looking at every reading does."""

from __future__ import annotations

import random

from gpu_otel_agent.model.counters import CounterRestarts, is_counter
from gpu_otel_agent.model.snapshot import Reading

_METRICS = ("hw.energy", "hw.power", "hw.errors", "hw.gpu.io", "hw.temperature",
            "gpu.pcie.replay.count", "hw.gpu.utilization")


def _reference(readings: list[Reading], time_ns: int, last: dict[object, tuple[float, int]],
               starts: dict[object, int]) -> bool:
    changed = False
    for reading in readings:
        if not is_counter(reading.metric):
            continue
        key = (reading.metric, reading.attributes)
        before = last.get(key)
        if before is not None and reading.value < before[0]:
            starts[key] = before[1] + 1
            changed = True
        last[key] = (reading.value, reading.time_ns or time_ns)
    return changed


def test_observe_equals_looking_at_every_reading() -> None:
    assert {is_counter(m) for m in _METRICS} == {True, False}
    rng = random.Random(7)
    restarts = CounterRestarts(default_start_ns=5)
    last: dict[object, tuple[float, int]] = {}
    starts: dict[object, int] = {}
    layouts = [[(rng.choice(_METRICS), (("n", i),)) for i in range(rng.randrange(1, 8))]
               for _ in range(100)]  # more than the layouts kept: some are forgotten
    for step in range(1, 1500):
        layout = rng.choice(layouts[:3] if step % 3 else layouts)
        readings = [Reading(metric, rng.randrange(100), attributes,
                            rng.choice((0, step * 10)))
                    for metric, attributes in layout]
        given = readings if step % 2 else tuple(readings)
        assert restarts.observe(given, step * 1000) == _reference(readings, step * 1000,
                                                                  last, starts)
        assert dict(restarts.starts()) == starts
    assert starts  # some series restarted
    assert restarts.restarts >= len(starts)
