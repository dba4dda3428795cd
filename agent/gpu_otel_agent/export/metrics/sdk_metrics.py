"""Snapshot -> OpenTelemetry SDK ``MetricsData``, for SDK exporters such as the console one.

The agent builds the data model itself instead of using observable instruments: the SDK would
keep dead attribute sets forever and run callbacks on the export thread. Here a series exists
exactly while the snapshot has a reading for it. (OTLP pushes skip this step: see
``otlp_proto``.)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from gpu_otel_agent.export.metrics.series import SeriesPoint, series
from gpu_otel_agent.export.otlp.scope import sdk_scope
from gpu_otel_agent.model.metrics import DOUBLE_UNITS, Instrument, spec_for
from gpu_otel_agent.model.resource import ResourceView, sdk_resource
from gpu_otel_agent.model.semconv import SCHEMA_URL
from gpu_otel_agent.model.snapshot import NodeSnapshot

if TYPE_CHECKING:
    from opentelemetry.sdk.metrics.export import Metric, MetricsData


# opentelemetry.sdk.metrics (about 1 MiB of modules) is imported when an SDK exporter first
# encodes, not at start-up: the OTLP fast path (otlp_proto) needs nothing from here.
def encode(snapshot: NodeSnapshot, resource: ResourceView) -> MetricsData:
    from opentelemetry.sdk.metrics.export import MetricsData, ResourceMetrics, ScopeMetrics

    metrics = [_metric(name, points) for name, points in series(snapshot).items()]
    scope = ScopeMetrics(scope=sdk_scope(), metrics=metrics, schema_url=SCHEMA_URL)
    return MetricsData(
        resource_metrics=[ResourceMetrics(resource=sdk_resource(resource), scope_metrics=[scope],
                                          schema_url=resource.schema_url)]
    )


def _metric(name: str, points: list[SeriesPoint]) -> Metric:
    from opentelemetry.sdk.metrics.export import (
        AggregationTemporality,
        Gauge,
        Metric,
        NumberDataPoint,
        Sum,
    )

    spec = spec_for(name)
    double = spec.unit in DOUBLE_UNITS  # as the wire encoder: one value type per metric
    data_points = [
        NumberDataPoint(
            attributes=dict(p.attributes),
            start_time_unix_nano=p.start_time_ns,
            time_unix_nano=p.time_ns,
            value=float(p.value) if double else p.value,
        )
        for p in points
    ]
    data: Gauge | Sum
    if spec.instrument is Instrument.GAUGE:
        data = Gauge(data_points=data_points)
    else:
        data = Sum(
            data_points=data_points,
            aggregation_temporality=AggregationTemporality.CUMULATIVE,
            is_monotonic=spec.instrument is Instrument.COUNTER,
        )
    return Metric(name=name, description=spec.description, unit=spec.unit, data=data)
