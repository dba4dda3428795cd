"""Flatten OTLP protobuf requests into the plain records tests assert on.

Kept apart from the store so the conversion rules (AnyValue -> Python, which
metric types become points) live in one small place and can be tested without
any transport or locking involved.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Literal

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1.metrics_pb2 import DataPointFlags, Metric, NumberDataPoint

from tests.receivers.records import LogEvent, Point

Kind = Literal["gauge", "sum"]


def any_value(value: AnyValue) -> object:
    """Convert an OTLP AnyValue to the closest Python value.

    Arrays become tuples (hashable, comparable to literal tuples in asserts) and
    kvlists become dicts, so nested attributes compare naturally.
    """
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    if kind == "int_value":
        return value.int_value
    if kind == "double_value":
        return value.double_value
    if kind == "bytes_value":
        return bytes(value.bytes_value)
    if kind == "array_value":
        return tuple(any_value(item) for item in value.array_value.values)
    if kind == "kvlist_value":
        return attributes(value.kvlist_value.values)
    raise ValueError(f"unsupported AnyValue kind {kind!r}")


def attributes(pairs: Iterable[KeyValue]) -> dict[str, object]:
    """Turn repeated KeyValue into a dict keyed by the OTel attribute name (dots kept)."""
    return {pair.key: any_value(pair.value) for pair in pairs}


_NO_RECORDED_VALUE = DataPointFlags.DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK


def _number(point: NumberDataPoint) -> float | int:
    """Keep int points as int so tests can tell an int counter from a double gauge."""
    if point.WhichOneof("value") == "as_int":
        return int(point.as_int)
    return float(point.as_double)


def _number_points(metric: Metric) -> tuple[Kind, bool | None, Iterable[NumberDataPoint]] | None:
    """Return (kind, monotonic, points) for gauges and sums; None for other types.

    Histograms and summaries are deliberately not flattened: the agent emits
    gauges and sums only, and a silent partial flattening would hide mistakes.
    Their names still show up in ``Store.metric_names()``.
    """
    data = metric.WhichOneof("data")
    if data == "gauge":
        return "gauge", None, metric.gauge.data_points
    if data == "sum":
        return "sum", bool(metric.sum.is_monotonic), metric.sum.data_points
    return None


def metric_names(request: ExportMetricsServiceRequest) -> Iterator[str]:
    """Every metric name in the request, whatever its data type."""
    for resource_metrics in request.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                yield metric.name


def points(request: ExportMetricsServiceRequest, received_at: float) -> Iterator[Point]:
    """Flatten gauge and sum data points, copying resource attributes onto each point."""
    for resource_metrics in request.resource_metrics:
        resource = attributes(resource_metrics.resource.attributes)
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                flattened = _number_points(metric)
                if flattened is None:
                    continue
                kind, monotonic, data_points = flattened
                for point in data_points:
                    if point.flags & _NO_RECORDED_VALUE:
                        # The end of a series (the agent's staleness marker), not a value:
                        # a backend records the series' end, so no point is flattened.
                        continue
                    yield Point(
                        metric=metric.name,
                        unit=metric.unit,
                        kind=kind,
                        monotonic=monotonic,
                        attributes=attributes(point.attributes),
                        resource=resource,
                        value=_number(point),
                        time_unix_nano=int(point.time_unix_nano),
                        start_time_unix_nano=int(point.start_time_unix_nano),
                        received_at=received_at,
                    )


def _body_text(body: AnyValue) -> str:
    """Log bodies are strings for health events; anything else is shown via str()."""
    value = any_value(body)
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return str(value)


def log_events(request: ExportLogsServiceRequest, received_at: float) -> Iterator[LogEvent]:
    """Flatten log records, copying resource attributes onto each event."""
    for resource_logs in request.resource_logs:
        resource = attributes(resource_logs.resource.attributes)
        for scope_logs in resource_logs.scope_logs:
            for record in scope_logs.log_records:
                yield LogEvent(
                    event_name=record.event_name,
                    severity_number=int(record.severity_number),
                    severity_text=record.severity_text,
                    body=_body_text(record.body),
                    attributes=attributes(record.attributes),
                    resource=resource,
                    time_unix_nano=int(record.time_unix_nano),
                    observed_time_unix_nano=int(record.observed_time_unix_nano),
                    received_at=received_at,
                )
