"""The default scheme: every series under its OpenTelemetry->Prometheus name.

Resource attributes become one ``target_info`` series, as the OpenTelemetry specification
says, instead of labels on every series (they are the same for the whole agent).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence

from gpu_otel_agent.export.metrics.series import SeriesPoint
from gpu_otel_agent.export.prometheus.exposition import Families, Labels
from gpu_otel_agent.export.prometheus.naming import label_name, metric_name, prometheus_type
from gpu_otel_agent.model.metrics import spec_for
from gpu_otel_agent.model.snapshot import Attributes

TARGET_INFO_HELP = "Target metadata (the agent's OpenTelemetry resource attributes)."


def label_value(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return json.dumps(list(value))
    return str(value)


def otel_labels(attributes: Attributes) -> Labels:
    return tuple((label_name(k), label_value(v)) for k, v in attributes)


class LabelCache:
    """A series' labels, kept from one scrape to the next by its attribute tuple as an object
    (export/metrics/series.py hands the same tuple while the series' device and workload are the
    same); converting every label of every series was the largest part of building a page's
    families. Holds the last scrape's series only; each entry holds its tuple, so an id is
    not reused while it is kept, and a lost race between two scrapes only converts again."""

    def __init__(self) -> None:
        self._last: dict[int, tuple[Attributes, Labels]] = {}
        self._now: dict[int, tuple[Attributes, Labels]] = {}

    def labels(self, attributes: Attributes) -> Labels:
        key = id(attributes)
        held = self._last.get(key)
        if held is None or held[0] is not attributes:
            held = (attributes, otel_labels(attributes))
        self._now[key] = held
        return held[1]

    def scraped(self) -> None:
        self._last, self._now = self._now, {}


_LABELS = LabelCache()


def add_otel_series(families: Families, name: str, points: Sequence[SeriesPoint],
                    labels: LabelCache | None = None) -> None:
    try:
        spec = spec_for(name)
    except KeyError:
        return  # not in the catalog: nothing to name it by
    family = families.family(metric_name(spec), prometheus_type(spec), spec.description)
    if family is None:
        return
    convert = otel_labels if labels is None else labels.labels
    for point in points:
        family.add(convert(point.attributes), point.value)


def add_target_info(families: Families, resource: Mapping[str, object]) -> None:
    family = families.family("target_info", "gauge", TARGET_INFO_HELP)
    if family is not None and resource:
        family.add(tuple((label_name(k), label_value(v)) for k, v in sorted(resource.items())), 1)


def otel_families(
    series: Mapping[str, Sequence[SeriesPoint]], resource: Mapping[str, object]
) -> Families:
    families = Families()
    add_target_info(families, resource)
    for name, points in series.items():
        add_otel_series(families, name, points, _LABELS)
    _LABELS.scraped()
    return families
