"""Metric families, and the Prometheus text format (0.0.4) as ``prometheus_client`` writes it.

Families are built fresh from a snapshot on every scrape (the client_python custom
``Collector`` idea): a series exists exactly while the snapshot has a reading for it, so a gone
process or GPU vanishes from the next scrape without bookkeeping. The two naming schemes fill
:class:`Families`; :func:`render` hands them to ``prometheus_client.exposition.generate_latest``
as ``Metric`` objects, so the escaping, number formatting and line syntax are the reference
library's, not ours.

prometheus_client writes a counter's ``TYPE`` line as ``<name>_total``; a counter whose name
does not end in ``_total`` (the ``dcgm`` scheme keeps dcgm-exporter's names, such as
``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION``) is therefore written ``untyped`` under its own name,
as OpenMetrics (what Prometheus negotiates) already serves it as ``unknown``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple

from prometheus_client.core import Metric, Sample
from prometheus_client.exposition import generate_latest

log = logging.getLogger(__name__)
Labels = tuple[tuple[str, str], ...]


@dataclass
class Family:
    name: str
    type: str  # "gauge" or "counter"
    help: str
    samples: dict[Labels, float | int] = field(default_factory=dict)

    def add(self, labels: Labels, value: float | int) -> None:
        # Prometheus fails the whole scrape on a duplicate series: keep the first, say so.
        if labels in self.samples:
            warn_once(f"duplicate series {self.name}{dict(labels)} dropped")
            return
        self.samples[labels] = value


class Families:
    """Families by name, in insertion order; a name reused with another type is refused."""

    def __init__(self) -> None:
        self._by_name: dict[str, Family] = {}

    def family(self, name: str, type_: str, help_: str) -> Family | None:
        existing = self._by_name.get(name)
        if existing is None:
            existing = Family(name, type_, help_)
            self._by_name[name] = existing
        elif existing.type != type_:
            warn_once(f"{name} is both a {existing.type} and a {type_}; the {type_} is dropped")
            return None
        return existing

    def __iter__(self) -> Iterator[Family]:
        return iter(self._by_name.values())

    def get(self, name: str) -> Family | None:
        return self._by_name.get(name)


_warned: set[str] = set()


def warn_once(message: str) -> None:
    if message not in _warned and len(_warned) < 1000:
        _warned.add(message)
        log.warning("prometheus endpoint: %s", message)


def as_metric(family: Family, name: str, type_: str) -> Metric:
    """``family`` as a prometheus_client ``Metric`` named ``name`` (a counter's without
    ``_total``, an info's without ``_info``) of ``type_``; samples keep the family's name.

    ``Metric`` and ``Sample`` rather than ``GaugeMetricFamily.add_metric``: the latter fixes one
    list of label names per family, and a family here may mix label sets (a process in a pod
    and one outside any)."""
    metric = Metric(name, family.help, type_)
    metric.samples = [Sample(family.name, dict(labels), value)
                      for labels, value in family.samples.items()]
    return metric


class Collected:
    """Metrics as a prometheus_client collector (anything with ``collect()``)."""

    def __init__(self, metrics: Iterable[Metric]) -> None:
        self._metrics = list(metrics)

    def collect(self) -> list[Metric]:
        return self._metrics


class _Written(NamedTuple):
    help: str
    samples: dict[Labels, float | int]
    text: bytes


class RenderCache:
    """Each family's text as ``prometheus_client`` last wrote it, reused while the family is
    unchanged (same help and the same samples, compared as a dict: in C, a fraction of the
    writer's cost, which formats and escapes every sample in Python).

    Most families of a page do not change between two scrapes (15 s apart, or two Prometheus
    servers of an HA pair scraping the same second): limits, clocks, identities, the slow
    groups. Only the families of this page are kept; a lost race between two scrapes' threads
    writes a family once more (one dict assignment each)."""

    def __init__(self) -> None:
        self._written: dict[tuple[str, str], _Written] = {}

    def page(self, typed: Iterable[tuple[Family, str, str]],
             write: Callable[[Metric], bytes]) -> list[bytes]:
        """Each family's text, in order: reused where unchanged, else written by ``write``."""
        last = self._written
        written: dict[tuple[str, str], _Written] = {}
        parts = []
        for family, name, type_ in typed:
            key = (name, type_)
            kept = last.get(key)
            if kept is None or kept.help != family.help or kept.samples != family.samples:
                kept = _Written(family.help, family.samples,
                                write(as_metric(family, name, type_)))
            written[key] = kept
            parts.append(kept.text)
        self._written = written
        return parts


def _text_typed(families: Families) -> Iterator[tuple[Family, str, str]]:
    for family in families:
        if not family.samples:
            continue
        if family.type != "counter":
            yield family, family.name, family.type
        elif family.name.endswith("_total"):
            yield family, family.name.removesuffix("_total"), "counter"
        else:
            yield family, family.name, "unknown"  # written "untyped"


def _write_text(metric: Metric) -> bytes:
    return generate_latest(Collected((metric,)))


_TEXT = RenderCache()


def render(families: Families, cache: RenderCache | None = _TEXT) -> bytes:
    """The page in text 0.0.4; ``cache=None`` writes every family afresh (the reference)."""
    if cache is None:
        return b"".join(_write_text(as_metric(f, n, t)) for f, n, t in _text_typed(families))
    return b"".join(cache.page(_text_typed(families), _write_text))
