"""Turns a :class:`NodeSnapshot` into OpenTelemetry ``MetricsData``.

The agent builds the data model itself instead of using observable instruments: the SDK would
keep dead attribute sets forever and run callbacks on the export thread. Here a series exists
exactly while the snapshot has a reading for it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

from opentelemetry.sdk.metrics.export import (
    AggregationTemporality,
    Gauge,
    Metric,
    MetricsData,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
    Sum,
)
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from agent.model.metrics import Instrument, spec_for
from agent.model.snapshot import DeviceSnapshot, HealthState, NodeSnapshot, Reading
from agent.version import VERSION

SCOPE = InstrumentationScope("gpu_otel_agent", VERSION)


def device_points(device: DeviceSnapshot) -> Iterable[tuple[Reading, int]]:
    """Readings of a device with their sample times, plus its ``hw.status``."""
    for sample in device.samples.values():
        for reading in sample.readings:
            yield reading, sample.time_ns


def status_readings(device: DeviceSnapshot) -> tuple[Reading, ...]:
    return tuple(
        Reading("hw.status", int(state is device.health), (("hw.state", state.value),))
        for state in HealthState
    )


def encode(snapshot: NodeSnapshot, resource: Resource) -> MetricsData:
    points: dict[str, list[NumberDataPoint]] = defaultdict(list)
    for device in snapshot.devices:
        identity = device.identity.attributes()
        with_type = (*identity[:1], ("hw.type", "gpu"), *identity[1:])
        timed = [*device_points(device),
                 *((r, snapshot.taken_ns) for r in status_readings(device))]
        for reading, time_ns in timed:
            if not math.isfinite(reading.value):
                continue  # a value that cannot be read is absent, never NaN
            base = with_type if reading.metric.startswith("hw.") else identity
            points[reading.metric].append(
                NumberDataPoint(
                    attributes=dict((*base, *reading.attributes)),
                    start_time_unix_nano=device.start_time_ns,
                    time_unix_nano=time_ns,
                    value=reading.value,
                )
            )
    metrics = [_metric(name, data_points) for name, data_points in sorted(points.items())]
    scope = ScopeMetrics(scope=SCOPE, metrics=metrics, schema_url="")
    return MetricsData(
        resource_metrics=[ResourceMetrics(resource=resource, scope_metrics=[scope],
                                          schema_url="")]
    )


def _metric(name: str, data_points: list[NumberDataPoint]) -> Metric:
    spec = spec_for(name)
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
