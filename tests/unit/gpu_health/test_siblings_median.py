"""The siblings check's own median equals ``statistics.median`` (it replaces it to keep the
statistics module, with fractions and decimal, out of the running agent: issue 41)."""

from __future__ import annotations

import random
import statistics

import pytest

from gpu_otel_agent.gpu_health.siblings import peers_median


@pytest.mark.parametrize("seed", range(200))
def test_equals_statistics_median(seed: int) -> None:
    rng = random.Random(seed)
    size = rng.randrange(1, 20)
    values: list[float] = (
        [rng.uniform(-1e4, 1e4) for _ in range(size)] if seed % 3 else
        [float(rng.randrange(0, 5)) for _ in range(size)])  # ties
    assert peers_median(iter(values)) == statistics.median(values)
    ints = [rng.randrange(0, 2000) for _ in range(size)]
    assert peers_median(ints) == statistics.median(ints)
    assert type(peers_median(ints)) is type(statistics.median(ints))


def test_no_data_is_an_error_as_in_statistics() -> None:
    with pytest.raises(ValueError):
        peers_median([])
    with pytest.raises(ValueError):
        statistics.median([])
