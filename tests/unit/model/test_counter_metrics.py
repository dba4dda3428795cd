"""``is_counter`` (a set of the catalog's counters, looked up per reading) says what the
catalog's own entry says, and no for a name the catalog does not have."""

from __future__ import annotations

from gpu_otel_agent.model.counters import is_counter
from gpu_otel_agent.model.metrics import (
    AGENT_METRICS,
    CUDA_METRICS,
    DEVICE_METRICS,
    PROCESS_METRICS,
    Instrument,
    spec_for,
)


def test_is_counter_follows_each_catalog_entry() -> None:
    names = [s.name for s in (*DEVICE_METRICS, *PROCESS_METRICS, *CUDA_METRICS, *AGENT_METRICS)]
    kinds = {is_counter(name) for name in names}
    assert kinds == {True, False}
    for name in names:
        assert is_counter(name) is (spec_for(name).instrument is Instrument.COUNTER), name
    assert not is_counter("hw.no.such.metric")
