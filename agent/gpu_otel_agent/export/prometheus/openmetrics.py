"""The same families in the OpenMetrics 1.0.0 text format, written by ``prometheus_client``.

This module decides what each family is served as; ``prometheus_client.openmetrics.exposition``
writes it. What differs from text 0.0.4, and why the series names a query sees stay the same:

- A counter family is named without ``_total`` and its samples carry it: ``# TYPE
  gpu_xid_errors counter`` then ``gpu_xid_errors_total{...} 3``. Prometheus stores the sample
  name, ``gpu_xid_errors_total``, exactly as it does from text 0.0.4.
- A counter whose name does not end in ``_total`` (the ``dcgm`` scheme keeps dcgm-exporter's
  ``DCGM_FI_DEV_PCIE_REPLAY_COUNTER``) would have to be renamed to be an OpenMetrics counter; it
  is served as ``unknown`` under its own name instead. So is a counter holding a value
  OpenMetrics forbids for counters (negative or NaN), rather than failing the whole scrape.
- ``target_info`` is an ``info`` family named ``target``, as the OpenTelemetry specification
  maps resource attributes to OpenMetrics.

A family whose names would clash with an earlier one's (``x`` counter owns ``x_total`` and
``x_created``) is served as ``unknown`` under its own name, or dropped with a warning if even
that clashes: a clash makes a strict parser reject the whole scrape.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

from prometheus_client.core import Metric
from prometheus_client.openmetrics.exposition import generate_latest

from gpu_otel_agent.export.prometheus.exposition import (
    Collected,
    Families,
    Family,
    RenderCache,
    as_metric,
    warn_once,
)

TARGET_INFO = "target_info"
# Names an OpenMetrics family of each type owns beside its own (the spec's reserved suffixes).
_SUFFIXES = {"counter": ("_total", "_created"), "info": ("_info",), "gauge": (), "unknown": ()}


def _counter_ok(family: Family) -> bool:
    return family.name.endswith("_total") and all(
        not math.isnan(v) and v >= 0 for v in family.samples.values())


def _typed(family: Family) -> tuple[str, str]:
    """(OpenMetrics family name, type) the family is served as, before clash checks."""
    if family.type == "counter":
        if _counter_ok(family):
            return family.name.removesuffix("_total"), "counter"
        return family.name, "unknown"
    if family.name == TARGET_INFO and all(v == 1 for v in family.samples.values()):
        return family.name.removesuffix("_info"), "info"
    return family.name, family.type


def _owned(name: str, type_: str) -> set[str]:
    return {name, *(name + suffix for suffix in _SUFFIXES[type_])}


def _openmetrics_typed(families: Families) -> Iterator[tuple[Family, str, str]]:
    seen: set[str] = set()
    for family in families:
        if not family.samples:
            continue
        name, type_ = _typed(family)
        if _owned(name, type_) & seen:
            name, type_ = family.name, "unknown"
            if _owned(name, type_) & seen:
                warn_once(f"{family.name} clashes with another family in OpenMetrics; dropped")
                continue
        seen |= _owned(name, type_)
        yield family, name, type_


def _write(metric: Metric) -> bytes:
    """One family, without the page's end (written once, after the last family)."""
    # This generate_latest has no annotations (prometheus_client 0.26); it returns bytes.
    body: bytes = generate_latest(Collected((metric,)))  # type: ignore[no-untyped-call]
    return body.removesuffix(EOF)


EOF = b"# EOF\n"
_OPENMETRICS = RenderCache()


def render_openmetrics(families: Families, cache: RenderCache | None = _OPENMETRICS) -> bytes:
    """The page in OpenMetrics 1.0.0; ``cache=None`` writes every family afresh."""
    if cache is None:
        parts = [_write(as_metric(f, n, t)) for f, n, t in _openmetrics_typed(families)]
    else:
        parts = cache.page(_openmetrics_typed(families), _write)
    parts.append(EOF)
    return b"".join(parts)
