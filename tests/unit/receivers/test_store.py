"""Store queries, AnyValue conversion and wait_for reporting, without any transport."""

from __future__ import annotations

import threading
import time

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.common.v1.common_pb2 import (
    AnyValue,
    ArrayValue,
    KeyValue,
    KeyValueList,
)
from opentelemetry.proto.metrics.v1.metrics_pb2 import (
    Gauge,
    Histogram,
    Metric,
    NumberDataPoint,
    ResourceMetrics,
    ScopeMetrics,
)

from tests.receivers.decode import any_value
from tests.receivers.records import Received
from tests.receivers.store import Store


def _request(*points: tuple[str, float, int, dict[str, str]]) -> ExportMetricsServiceRequest:
    metrics = [
        Metric(
            name=name,
            gauge=Gauge(
                data_points=[
                    NumberDataPoint(
                        as_double=value,
                        time_unix_nano=ts,
                        attributes=[
                            KeyValue(key=k, value=AnyValue(string_value=v))
                            for k, v in attrs.items()
                        ],
                    )
                ]
            ),
        )
        for name, value, ts, attrs in points
    ]
    metrics.append(Metric(name="latency", histogram=Histogram()))
    return ExportMetricsServiceRequest(
        resource_metrics=[ResourceMetrics(scope_metrics=[ScopeMetrics(metrics=metrics)])]
    )


def _add(store: Store, request: ExportMetricsServiceRequest) -> None:
    store.add(Received(signal="metrics", transport="grpc", request=request, received_at=1.0))


def test_any_value_conversion() -> None:
    nested = AnyValue(
        kvlist_value=KeyValueList(
            values=[
                KeyValue(key="a.b", value=AnyValue(int_value=-3)),
                KeyValue(
                    key="list",
                    value=AnyValue(
                        array_value=ArrayValue(
                            values=[AnyValue(bool_value=True), AnyValue(double_value=1.5)]
                        )
                    ),
                ),
                KeyValue(key="raw", value=AnyValue(bytes_value=b"\x00\x01")),
                KeyValue(key="s", value=AnyValue(string_value="x")),
                KeyValue(key="empty", value=AnyValue()),
            ]
        )
    )
    assert any_value(nested) == {
        "a.b": -3,
        "list": (True, 1.5),
        "raw": b"\x00\x01",
        "s": "x",
        "empty": None,
    }


def test_filters_latest_and_names() -> None:
    store = Store()
    _add(store, _request(("util", 0.1, 20, {"hw.id": "a"}), ("util", 0.2, 10, {"hw.id": "b"})))
    _add(store, _request(("util", 0.3, 5, {"hw.id": "a"})))
    assert [p.value for p in store.points("util", {"hw.id": "a"})] == [0.1, 0.3]
    latest = store.latest("util", {"hw.id": "a"})
    assert latest is not None and latest.value == 0.1  # newest timestamp, not newest arrival
    assert store.latest("util", {"hw.id": "zzz"}) is None
    assert store.metric_names() == {"util", "latency"}  # histograms named, not flattened
    assert {p.metric for p in store.points()} == {"util"}
    store.clear()
    assert store.points() == [] and store.metric_names() == set()


def test_wait_for_wakes_on_arrival() -> None:
    store = Store()
    timer = threading.Timer(0.05, _add, (store, _request(("util", 0.5, 1, {}))))
    timer.start()
    started = time.monotonic()
    point = store.wait_for(lambda s: s.latest("util"), timeout=60)
    assert point.value == 0.5
    assert time.monotonic() - started < 30  # woke on the arrival, not at its 60 s timeout
    timer.join()


def test_wait_for_timeout_reports_what_arrived() -> None:
    store = Store("unit")
    store.add_context(lambda: "extra context line")
    _add(store, _request(("util", 0.5, 1, {"hw.id": "a"})))
    with pytest.raises(AssertionError) as excinfo:
        store.wait_for(lambda s: s.points("power"), timeout=0.05, what="power points")
    message = str(excinfo.value)
    assert "power points" in message
    assert "util[('hw.id', 'a')] = 0.5" in message
    assert "extra context line" in message


def test_a_series_end_is_not_a_value() -> None:
    """A point flagged "no recorded value" (the agent's end of a series) is no point: a
    backend stores a staleness marker, not the zero such a point would decode to."""
    store = Store()
    request = _request(("hw.power", 300.0, 10, {"hw.id": "GPU-0"}),
                       ("hw.power", 0.0, 20, {"hw.id": "GPU-1"}))
    ended = request.resource_metrics[0].scope_metrics[0].metrics[1].gauge.data_points[0]
    ended.ClearField("as_double")
    ended.flags = 1  # DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK
    _add(store, request)
    assert [p.attributes["hw.id"] for p in store.points("hw.power")] == ["GPU-0"]
