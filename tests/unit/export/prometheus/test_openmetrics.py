"""OpenMetrics output, checked by prometheus_client's OpenMetrics parser (a strict, independent
reader): it parses, it ends in ``# EOF``, and a query sees the very series text 0.0.4 gives."""

from __future__ import annotations

import math

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as text_families

from gpu_otel_agent.export.metrics.series import series
from gpu_otel_agent.export.prometheus.dcgm_scheme import DcgmTranslator
from gpu_otel_agent.export.prometheus.exposition import Families, render
from gpu_otel_agent.export.prometheus.openmetrics import render_openmetrics
from gpu_otel_agent.export.prometheus.otel_scheme import otel_families
from tests.unit.export.prometheus.snapshots import node

RESOURCE = {"service.name": "gpu-otel-agent", "host.name": "vm-1", "k8s.node.name": "gpu-node-7"}
Sample = tuple[str, frozenset[tuple[str, str]], float]


def _schemes() -> dict[str, Families]:
    points = series(node())
    return {"otel": otel_families(points, RESOURCE),
            "dcgm": DcgmTranslator(RESOURCE).families(points)}


def _text_samples(families: Families) -> set[Sample]:
    """Series as text 0.0.4 writes them (the names Prometheus stores from it)."""
    text = render(families).decode()
    written = {line.split("{")[0].split(" ")[0] for line in text.splitlines()
               if line and not line.startswith("#")}
    out = set()
    for family in text_families(text):
        for s in family.samples:
            # this parser renames a counter's sample to X_total even where the text says X
            name = s.name if s.name in written else family.name
            out.add((name, frozenset(s.labels.items()), s.value))
    return out


def _openmetrics_samples(body: bytes) -> tuple[set[Sample], dict[str, str]]:
    types, out = {}, set()
    for family in openmetrics_families(body.decode()):
        types[family.name] = family.type
        out |= {(s.name, frozenset(s.labels.items()), s.value) for s in family.samples}
    return out, types


@pytest.mark.parametrize("scheme", ["otel", "dcgm"])
def test_openmetrics_has_the_same_series_as_text(scheme: str) -> None:
    families = _schemes()[scheme]
    body = render_openmetrics(families)
    assert body.endswith(b"\n# EOF\n")
    samples, _ = _openmetrics_samples(body)
    assert samples == _text_samples(families)
    assert len(samples) > 20


def test_counters_drop_total_in_the_family_name_only_and_target_info_is_info() -> None:
    body = render_openmetrics(_schemes()["otel"])
    samples, types = _openmetrics_samples(body)
    names = {name for name, _, _ in samples}
    assert types["hw_energy_joules"] == "counter"
    assert "hw_energy_joules_total" in names
    assert b"# TYPE hw_energy_joules counter\n" in body
    assert types["target"] == "info"
    assert "target_info" in names
    assert types["hw_gpu_utilization_ratio"] == "gauge"


def test_dcgm_counters_keep_their_names_as_unknown() -> None:
    body = render_openmetrics(_schemes()["dcgm"])
    samples, types = _openmetrics_samples(body)
    assert types["DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"] == "unknown"
    assert "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION" in {name for name, _, _ in samples}
    assert types["gpu_agent_exports_completed"] == "counter"  # served under its OTel name


def test_values_openmetrics_forbids_in_counters_and_clashing_names_do_not_fail_a_scrape() -> None:
    families = Families()
    bad = families.family("odd_total", "counter", 'help with "quotes"\nand a newline')
    assert bad is not None
    bad.add((("k", "v"),), math.nan)
    gauge = families.family("x_total", "gauge", "a gauge that owns x_total")
    assert gauge is not None
    gauge.add((), 2.0)
    counter = families.family("x", "counter", "would own x_total: clashes")
    assert counter is not None
    counter.add((), 5)
    clashing = families.family("x_created", "gauge", "clashes with nothing once x is unknown")
    assert clashing is not None
    clashing.add((), 1.0)
    samples, types = _openmetrics_samples(render_openmetrics(families))
    assert types == {"odd_total": "unknown", "x_total": "gauge", "x": "unknown",
                     "x_created": "gauge"}
    by_name = {name: value for name, _, value in samples}
    assert math.isnan(by_name["odd_total"])
    assert (by_name["x_total"], by_name["x"], by_name["x_created"]) == (2.0, 5, 1.0)


def test_a_counter_clashing_with_a_gauge_is_unknown_and_a_name_it_owns_is_dropped() -> None:
    families = Families()
    for name, type_, value in (("y", "gauge", 1.0), ("y_total", "counter", 3),
                               ("w_total", "counter", 4), ("w_created", "gauge", 9.0)):
        family = families.family(name, type_, name)
        assert family is not None
        family.add((), value)
    samples, types = _openmetrics_samples(render_openmetrics(families))
    assert types == {"y": "gauge", "y_total": "unknown", "w": "counter"}
    assert {(name, value) for name, _, value in samples} == {
        ("y", 1.0), ("y_total", 3), ("w_total", 4)}
