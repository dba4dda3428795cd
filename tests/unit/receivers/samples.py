"""Hand-built telemetry shared by the receiver tests.

Built with the SDK's own data classes (not the meter API) so the exact values,
units, attributes and timestamps are known up front and every transport can
be checked against the same expectations.
"""

from __future__ import annotations

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.sdk._logs import ReadableLogRecord
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

from tests.receivers.store import Store

GPU = "GPU-6f1c2d3e-0000-4000-8000-0123456789ab"
RESOURCE = {"service.name": "gpu-otel-agent", "host.name": "node-1"}
START_NS = 1_700_000_000_000_000_000
TIME_NS = START_NS + 5_000_000_000
MEMORY_ATTRS: dict[str, object] = {
    "hw.id": GPU,
    "hw.gpu.memory.state": "used",
    "tags": ("a", "b"),
    "ratio": 0.5,
    "ecc": True,
    "index": 0,
}


def _point(value: float | int, attributes: dict[str, object]) -> NumberDataPoint:
    return NumberDataPoint(
        attributes=attributes,  # type: ignore[arg-type]
        start_time_unix_nano=START_NS,
        time_unix_nano=TIME_NS,
        value=value,
    )


def metrics_data(extra_gauge_points: int = 0) -> MetricsData:
    """A gauge, a monotonic int sum and a non-monotonic sum with mixed-type attributes.

    ``extra_gauge_points`` pads the gauge so gRPC actually compresses the message
    (gRPC sends a message uncompressed when gzip would not make it smaller).
    """
    gauge_points = [_point(0.75, {"hw.id": GPU, "hw.type": "gpu"})]
    gauge_points += [
        _point(float(i), {"hw.id": f"GPU-pad-{i}", "hw.type": "gpu"})
        for i in range(extra_gauge_points)
    ]
    metrics = [
        Metric(
            name="hw.gpu.utilization",
            description="GPU busy fraction",
            unit="1",
            data=Gauge(data_points=gauge_points),
        ),
        Metric(
            name="hw.errors",
            description="XID errors",
            unit="{error}",
            data=Sum(
                data_points=[_point(3, {"hw.id": GPU, "error.type": "xid"})],
                aggregation_temporality=AggregationTemporality.CUMULATIVE,
                is_monotonic=True,
            ),
        ),
        Metric(
            name="hw.gpu.memory.usage",
            description="framebuffer bytes",
            unit="By",
            data=Sum(
                data_points=[_point(1234, MEMORY_ATTRS)],
                aggregation_temporality=AggregationTemporality.CUMULATIVE,
                is_monotonic=False,
            ),
        ),
    ]
    return MetricsData(
        resource_metrics=[
            ResourceMetrics(
                resource=Resource(RESOURCE),
                scope_metrics=[
                    ScopeMetrics(
                        scope=InstrumentationScope("tests.receivers"),
                        metrics=metrics,
                        schema_url="",
                    )
                ],
                schema_url="",
            )
        ]
    )


def xid_log() -> ReadableLogRecord:
    """A health event the way the agent will emit it: a log record with an event_name."""
    record = LogRecord(
        timestamp=TIME_NS,
        observed_timestamp=TIME_NS + 1,
        severity_number=SeverityNumber.WARN,
        severity_text="WARN",
        body="XID 79: GPU has fallen off the bus",
        attributes={"hw.id": GPU, "gpu.xid": 79},
        event_name="hw.gpu.xid",
    )
    return ReadableLogRecord(log_record=record, resource=Resource(RESOURCE))


def assert_sample_metrics(store: Store, exports: int = 1) -> None:
    """The store returns exactly what ``metrics_data()`` put in, whatever the transport.

    ``exports`` is how many times the sample was accepted (each adds one point per series).
    """
    util = store.latest("hw.gpu.utilization", {"hw.id": GPU})
    assert util is not None
    assert (util.value, util.unit, util.kind, util.monotonic) == (0.75, "1", "gauge", None)
    assert util.attributes == {"hw.id": GPU, "hw.type": "gpu"}
    assert util.resource == RESOURCE
    # The SDK's OTLP encoder never sends a start time for gauges; sums carry theirs.
    assert (util.start_time_unix_nano, util.time_unix_nano) == (0, TIME_NS)

    errors = store.points("hw.errors", {"hw.id": GPU, "error.type": "xid"})
    assert len(errors) == exports
    assert (errors[0].value, errors[0].unit, errors[0].kind) == (3, "{error}", "sum")
    assert isinstance(errors[0].value, int)
    assert errors[0].monotonic is True
    assert (errors[0].start_time_unix_nano, errors[0].time_unix_nano) == (START_NS, TIME_NS)

    memory = store.latest("hw.gpu.memory.usage", {"hw.gpu.memory.state": "used"})
    assert memory is not None
    assert (memory.value, memory.unit, memory.kind, memory.monotonic) == (1234, "By", "sum", False)
    assert memory.attributes == MEMORY_ATTRS

    assert store.metric_names() >= {"hw.gpu.utilization", "hw.errors", "hw.gpu.memory.usage"}


def assert_sample_log(store: Store) -> None:
    """The store returns exactly what ``xid_log()`` put in."""
    events = store.logs("hw.gpu.xid", {"hw.id": GPU})
    assert len(events) == 1
    event = events[0]
    assert (event.severity_number, event.severity_text) == (SeverityNumber.WARN.value, "WARN")
    assert event.body == "XID 79: GPU has fallen off the bus"
    assert event.attributes == {"hw.id": GPU, "gpu.xid": 79}
    assert event.resource == RESOURCE
    assert (event.time_unix_nano, event.observed_time_unix_nano) == (TIME_NS, TIME_NS + 1)
