"""The gRPC receiver against the real SDK OTLP/gRPC exporters."""

from __future__ import annotations

import grpc
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExportResult

from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.unit.receivers.samples import (
    assert_sample_log,
    assert_sample_metrics,
    metrics_data,
    xid_log,
)


def test_metrics_round_trip(otlp_grpc_receiver: OtlpGrpcReceiver) -> None:
    exporter = OTLPMetricExporter(endpoint=otlp_grpc_receiver.endpoint, timeout=5)
    try:
        assert exporter.export(metrics_data()) == MetricExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert_sample_metrics(otlp_grpc_receiver.store)
    [received] = otlp_grpc_receiver.store.received("metrics")
    assert received.transport == "grpc"


def test_log_event_round_trip(otlp_grpc_receiver: OtlpGrpcReceiver) -> None:
    exporter = OTLPLogExporter(endpoint=otlp_grpc_receiver.endpoint, timeout=5)
    try:
        assert exporter.export([xid_log()]) == LogRecordExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert_sample_log(otlp_grpc_receiver.store)
    assert otlp_grpc_receiver.store.event_names() == {"hw.gpu.xid"}


def test_headers_and_gzip_arrive(otlp_grpc_receiver: OtlpGrpcReceiver) -> None:
    exporter = OTLPMetricExporter(
        endpoint=otlp_grpc_receiver.endpoint,
        headers="x-tenant=team-a,authorization=Bearer%20t0k",  # OTEL_EXPORTER_OTLP_HEADERS syntax
        compression=grpc.Compression.Gzip,
        timeout=5,
    )
    plain = OTLPMetricExporter(endpoint=otlp_grpc_receiver.endpoint, timeout=5)
    try:
        assert exporter.export(metrics_data(extra_gauge_points=20)) == MetricExportResult.SUCCESS
        assert plain.export(metrics_data(extra_gauge_points=20)) == MetricExportResult.SUCCESS
    finally:
        exporter.shutdown()
        plain.shutdown()
    gzipped, uncompressed = otlp_grpc_receiver.store.received("metrics")
    assert gzipped.metadata["x-tenant"] == "team-a"
    assert gzipped.metadata["authorization"] == "Bearer t0k"
    assert gzipped.compression == "gzip"
    assert uncompressed.compression is None
    assert "x-tenant" not in uncompressed.metadata
    assert_sample_metrics(otlp_grpc_receiver.store, exports=2)


def test_reject_makes_export_fail(otlp_grpc_receiver: OtlpGrpcReceiver) -> None:
    otlp_grpc_receiver.reject()
    # A timeout shorter than the first retry backoff (1 s) makes the SDK give up at once.
    exporter = OTLPMetricExporter(endpoint=otlp_grpc_receiver.endpoint, timeout=0.5)
    try:
        assert exporter.export(metrics_data()) == MetricExportResult.FAILURE
        assert otlp_grpc_receiver.store.points() == []
        assert len(otlp_grpc_receiver.store.received("metrics", accepted=False)) == 1
        otlp_grpc_receiver.accept()
        assert exporter.export(metrics_data()) == MetricExportResult.SUCCESS
    finally:
        exporter.shutdown()
    assert_sample_metrics(otlp_grpc_receiver.store)


def test_stop_and_restart_on_same_port(otlp_grpc_receiver: OtlpGrpcReceiver) -> None:
    port = otlp_grpc_receiver.port
    exporter = OTLPMetricExporter(endpoint=otlp_grpc_receiver.endpoint, timeout=0.5)
    try:
        otlp_grpc_receiver.stop()
        assert exporter.export(metrics_data()) == MetricExportResult.FAILURE
        otlp_grpc_receiver.start()
        assert otlp_grpc_receiver.port == port
        otlp_grpc_receiver.store.wait_for(
            lambda _: exporter.export(metrics_data()) == MetricExportResult.SUCCESS,
            timeout=5,
            what="export to succeed after restart",
        )
    finally:
        exporter.shutdown()
    assert_sample_metrics(otlp_grpc_receiver.store)
