"""The points that end a series (``FLAG_NO_RECORDED_VALUE``), taken out of a decoded request:
tests compare a long-lived encoder's exports with a fresh encoder's, which has no last export
to end and so sends none."""

from __future__ import annotations

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)

NO_RECORDED_VALUE = 1  # DataPointFlags.DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK
Series = tuple[str, frozenset[tuple[str, str]]]  # (metric, attributes as key/str(value))


def without_ends(request: ExportMetricsServiceRequest) -> tuple[
        ExportMetricsServiceRequest, list[Series]]:
    """The request less the points that end a series, and those ends as (metric,
    attributes)."""
    ends: list[Series] = []
    out = ExportMetricsServiceRequest()
    out.CopyFrom(request)
    for scope in (s for r in out.resource_metrics for s in r.scope_metrics):
        for metric in list(scope.metrics):
            points = metric.gauge.data_points if metric.HasField("gauge") \
                else metric.sum.data_points
            for point in list(points):
                if point.flags & NO_RECORDED_VALUE:
                    ends.append((metric.name, frozenset(
                        (a.key, str(a.value)) for a in point.attributes)))
                    points.remove(point)
            if not points:
                scope.metrics.remove(metric)
    return out, ends
