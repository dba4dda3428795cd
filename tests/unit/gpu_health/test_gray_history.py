"""A watch keeps of its earlier reads only the counters conditions take rates of
(``gray.RATE_METRICS``): every condition judges the same against such a read as against the
whole one, over random reads; and a rate of any other metric is refused, so a condition that
starts taking one fails its tests instead of reading an absent value."""

from __future__ import annotations

import random

import pytest

from gpu_otel_agent.gpu_health import gray
from gpu_otel_agent.model.snapshot import Reading


def _read(rng: random.Random) -> tuple[Reading, ...]:
    links = range(rng.randrange(0, 4))
    readings = [
        Reading("hw.gpu.utilization", rng.choice([0.0, 0.9]), (("hw.gpu.task", "general"),)),
        Reading("gpu.pcie.link.generation", rng.randrange(1, 6)),
        Reading("gpu.pcie.link.max_generation", 5),
        Reading("gpu.pcie.link.width", rng.choice([4, 8, 16])),
        Reading("gpu.pcie.link.max_width", 16),
        Reading("gpu.pcie.replay", rng.randrange(0, 400)),
        Reading("hw.errors", rng.randrange(0, 400), (("error.type", "corrected"),)),
        Reading("gpu.clock.frequency", rng.randrange(500, 2000), (("gpu.clock.domain", "sm"),)),
        Reading("gpu.clock.limit", 1980, (("gpu.clock.domain", "sm"),)),
        Reading("hw.temperature", rng.randrange(40, 95), (("hw.sensor_location", "gpu"),)),
        Reading("hw.temperature.limit", 90, (("hw.limit_type", "high.degraded"),)),
        *(Reading("gpu.nvlink.errors", rng.randrange(0, 10_000), (("error.type", kind),))
          for kind in ("crc", "replay", "recovery")),
        *(Reading("gpu.nvlink.link.state", rng.choice([0, 1, 2, 3]), (("gpu.nvlink.link", i),))
          for i in links),
        *(Reading("gpu.nvlink.link.errors", rng.randrange(0, 50),
                  (("gpu.nvlink.link", i), ("error.type", "crc"))) for i in links),
    ]
    rng.shuffle(readings)
    return tuple(r for r in readings if rng.random() < 0.9)  # some absent


@pytest.mark.parametrize("seed", range(3))
def test_conditions_judge_alike_against_the_kept_and_the_whole_earlier_read(seed: int) -> None:
    rng = random.Random(seed)
    judged = 0
    for _ in range(300):
        before, now = _read(rng), _read(rng)
        whole = gray.Reads(before, 0.0)
        kept = gray.Reads(tuple(r for r in before if r.metric in gray.RATE_METRICS), 0.0)
        for spec in gray.CONDITIONS:
            for active in (False, True):
                expected = spec.evaluate(gray.Reads(now, 60.0, whole), active)
                assert spec.evaluate(gray.Reads(now, 60.0, kept), active) == expected
                judged += expected.bad is not None
    assert judged > 1000  # the conditions were judged, not only "cannot tell"


def test_a_rate_of_a_metric_an_earlier_read_does_not_keep_is_refused() -> None:
    reads = gray.Reads((Reading("hw.power", 300.0),), 60.0, gray.Reads((), 0.0))
    with pytest.raises(ValueError, match="RATE_METRICS"):
        reads.rate("hw.power")
