"""The HTTP receiver against the real SDK OTLP/HTTP exporters."""

from __future__ import annotations

import json
import urllib.request

from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExportResult

from tests.receivers.otlp_http import OtlpHttpReceiver
from tests.unit.receivers.samples import (
    assert_sample_log,
    assert_sample_metrics,
    metrics_data,
    xid_log,
)


def test_metrics_round_trip_with_headers_and_gzip(otlp_http_receiver: OtlpHttpReceiver) -> None:
    exporter = OTLPMetricExporter(
        endpoint=otlp_http_receiver.url("metrics"),
        headers={"x-tenant": "team-a"},
        compression=Compression.Gzip,
        timeout=5,
    )
    try:
        assert exporter.export(metrics_data()) == MetricExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert_sample_metrics(otlp_http_receiver.store)
    [received] = otlp_http_receiver.store.received("metrics")
    assert received.transport == "http"
    assert received.compression == "gzip"
    assert received.metadata["x-tenant"] == "team-a"
    assert received.metadata["content-type"] == "application/x-protobuf"


def test_log_event_round_trip_uncompressed(otlp_http_receiver: OtlpHttpReceiver) -> None:
    exporter = OTLPLogExporter(endpoint=otlp_http_receiver.url("logs"), timeout=5)
    try:
        assert exporter.export([xid_log()]) == LogRecordExportResult.SUCCESS
    finally:
        exporter.shutdown()  # type: ignore[no-untyped-call]  # SDK lacks annotation
    assert_sample_log(otlp_http_receiver.store)
    [received] = otlp_http_receiver.store.received("logs")
    assert received.compression is None


def test_json_encoding_is_accepted(otlp_http_receiver: OtlpHttpReceiver) -> None:
    body = {
        "resourceMetrics": [
            {
                "scopeMetrics": [
                    {
                        "metrics": [
                            {
                                "name": "hw.gpu.temperature",
                                "unit": "Cel",
                                "gauge": {"dataPoints": [{"asInt": "61", "timeUnixNano": "7"}]},
                            }
                        ]
                    }
                ]
            }
        ]
    }
    request = urllib.request.Request(
        otlp_http_receiver.url("metrics"),
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        assert response.status == 200
    point = otlp_http_receiver.store.latest("hw.gpu.temperature")
    assert point is not None
    assert (point.value, point.unit, point.time_unix_nano) == (61, "Cel", 7)


def test_reject_then_restart_on_same_port(otlp_http_receiver: OtlpHttpReceiver) -> None:
    exporter = OTLPMetricExporter(endpoint=otlp_http_receiver.url("metrics"), timeout=0.5)
    port = otlp_http_receiver.port
    try:
        otlp_http_receiver.reject()
        assert exporter.export(metrics_data()) == MetricExportResult.FAILURE
        assert otlp_http_receiver.store.points() == []
        assert len(otlp_http_receiver.store.received(accepted=False)) == 1

        otlp_http_receiver.accept()
        otlp_http_receiver.stop()
        assert exporter.export(metrics_data()) == MetricExportResult.FAILURE
        otlp_http_receiver.start()
        assert otlp_http_receiver.port == port
        assert exporter.export(metrics_data()) == MetricExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert_sample_metrics(otlp_http_receiver.store)
