"""A page written from reused family texts parses to the same samples as a fresh one.

``RenderCache`` keeps each family's text from the last scrape and reuses it while the family is
unchanged. The oracle is prometheus_client itself twice over: its writer on every family
afresh (``cache=None``), and its parsers (text 0.0.4 and OpenMetrics), over a run of scrapes in
which values, series, help and schemes change, families vanish and come back. The labels a
scrape keeps per series (``otel_scheme.LabelCache``) are checked against a fresh conversion.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families as text_families

from gpu_otel_agent.export.metrics.series import series
from gpu_otel_agent.export.prometheus.dcgm_scheme import DcgmTranslator
from gpu_otel_agent.export.prometheus.exposition import Families, RenderCache, render
from gpu_otel_agent.export.prometheus.openmetrics import render_openmetrics
from gpu_otel_agent.export.prometheus.otel_scheme import (
    add_otel_series,
    add_target_info,
    otel_families,
)
from gpu_otel_agent.model.snapshot import NodeSnapshot
from tests.unit.export.prometheus.snapshots import POD_A, POD_B, device, node

RESOURCE = {"service.name": "gpu-otel-agent", "host.name": "vm-1"}
Parsed = list[tuple[str, str, list[tuple[str, tuple[tuple[str, str], ...], float]]]]


def _parsed(body: bytes, parse: Callable[[str], object]) -> Parsed:
    out: Parsed = []
    for family in parse(body.decode()):  # type: ignore[attr-defined]
        out.append((family.name, family.type,
                    [(s.name, tuple(sorted(s.labels.items())), s.value)
                     for s in family.samples]))
    return out


def _snapshots() -> list[NodeSnapshot]:
    """Scrapes of a node that changes a little each time, and once a lot."""
    t = 5_000_000_000
    base = node(t)
    changed_one = NodeSnapshot((device(0, 0.37, 40000, t), device(1, 0.9, 1000, t)), t,
                               base.agent)
    two_pods = NodeSnapshot((device(0, 0.37, 40000, t, pods=(POD_A, POD_B)),
                             device(1, 0.9, 1000, t)), t, base.agent)
    one_gpu = NodeSnapshot((device(1, 0.9, 1000, t),), t, base.agent)
    return [base, base, changed_one, two_pods, two_pods, one_gpu, base, base]


def _families(snapshot: NodeSnapshot, scheme: str) -> Families:
    points = series(snapshot)
    if scheme == "dcgm":
        return DcgmTranslator(RESOURCE).families(points)
    return otel_families(points, RESOURCE)


WRITERS = {"text": (render, text_families), "openmetrics": (render_openmetrics,
                                                            openmetrics_families)}


@pytest.mark.parametrize("format_", sorted(WRITERS))
def test_reused_pages_parse_as_fresh_ones(format_: str) -> None:
    write, parse = WRITERS[format_]
    cache = RenderCache()
    reused = 0
    for scheme in ("otel", "dcgm", "otel"):  # a scheme switch reuses nothing wrongly
        for snapshot in _snapshots():
            families = _families(snapshot, scheme)
            before = dict(cache._written)
            page = write(families, cache)
            fresh = write(families, None)
            assert _parsed(page, parse) == _parsed(fresh, parse)
            assert page == fresh  # same insertion order here: even the bytes agree
            reused += sum(1 for key, kept in cache._written.items()
                          if before.get(key) is kept)
    assert reused > 50  # unchanged families were reused, not written again


def test_a_changed_value_or_help_is_written_again() -> None:
    cache = RenderCache()
    families = Families()
    family = families.family("x", "gauge", "help one")
    assert family is not None
    family.add((("a", "1"),), 1.5)
    assert b'x{a="1"} 1.5' in render(families, cache)
    again = Families()
    changed = again.family("x", "gauge", "help two")
    assert changed is not None
    changed.add((("a", "1"),), 2.5)
    page = render(again, cache)
    assert b'x{a="1"} 2.5' in page and b"# HELP x help two" in page
    assert b"1.5" not in page


def test_only_this_page_s_families_are_kept() -> None:
    cache = RenderCache()
    render(_families(node(), "otel"), cache)
    held = len(cache._written)
    render(Families(), cache)
    assert held > 10 and cache._written == {}


def _uncached(snapshot: NodeSnapshot) -> Families:
    families = Families()
    add_target_info(families, RESOURCE)
    for name, points in series(snapshot).items():
        add_otel_series(families, name, points)  # no label cache: every label converted
    return families


def test_kept_labels_give_the_families_a_fresh_conversion_gives() -> None:
    for snapshot in _snapshots():
        kept = {(f.name, f.type, f.help): dict(f.samples)
                for f in otel_families(series(snapshot), RESOURCE)}
        fresh = {(f.name, f.type, f.help): dict(f.samples) for f in _uncached(snapshot)}
        assert kept == fresh and len(kept) > 10
