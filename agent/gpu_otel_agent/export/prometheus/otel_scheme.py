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


def add_otel_series(families: Families, name: str, points: Sequence[SeriesPoint]) -> None:
    try:
        spec = spec_for(name)
    except KeyError:
        return  # not in the catalog: nothing to name it by
    family = families.family(metric_name(spec), prometheus_type(spec), spec.description)
    if family is None:
        return
    for point in points:
        family.add(otel_labels(point.attributes), point.value)


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
        add_otel_series(families, name, points)
    return families
