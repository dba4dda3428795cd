"""OpenTelemetry -> Prometheus names follow the specification's translation."""

from __future__ import annotations

import re

import pytest

from gpu_otel_agent.export.prometheus.naming import label_name, metric_name, prometheus_type
from gpu_otel_agent.model.metrics import AGENT_METRICS, DEVICE_METRICS, spec_for


@pytest.mark.parametrize(("otel", "prometheus"), [
    ("hw.gpu.utilization", "hw_gpu_utilization_ratio"),  # gauge of unit 1
    ("hw.gpu.memory.usage", "hw_gpu_memory_usage_bytes"),  # up-down counter: no _total
    ("hw.energy", "hw_energy_joules_total"),
    ("hw.temperature", "hw_temperature_celsius"),
    ("hw.errors", "hw_errors_total"),  # {error} adds no unit word
    ("hw.status", "hw_status"),  # up-down counter of unit 1: no ratio
    ("gpu.clock.frequency", "gpu_clock_frequency_hertz"),
    ("gpu.violation.time", "gpu_violation_time_seconds_total"),
    ("gpu_agent.cycle.latency", "gpu_agent_cycle_latency_seconds"),
    ("gpu_agent.cycles.completed", "gpu_agent_cycles_completed_total"),
])
def test_catalog_names_translate_as_the_specification_says(otel: str, prometheus: str) -> None:
    assert metric_name(spec_for(otel)) == prometheus


def test_every_catalog_name_is_valid_unique_and_typed() -> None:
    specs = (*DEVICE_METRICS, *AGENT_METRICS)
    names = [metric_name(s) for s in specs]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", n) for n in names)
    assert {prometheus_type(s) for s in specs} == {"gauge", "counter"}


def test_label_names() -> None:
    assert label_name("k8s.pod.name") == "k8s_pod_name"
    assert label_name("hw.id") == "hw_id"
    assert label_name("9lives") == "key_9lives"
