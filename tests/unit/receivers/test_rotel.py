"""The rotel-agent chain: SDK exporter -> rotel -> our gRPC receiver."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.metrics.export import MetricExportResult

from tests.receivers.rotel import RotelReceiver
from tests.receivers.store import Store
from tests.unit.receivers.samples import (
    GPU,
    assert_sample_log,
    assert_sample_metrics,
    metrics_data,
    xid_log,
)


def test_gauge_and_sums_pass_through_rotel(rotel_receiver: RotelReceiver) -> None:
    exporter = OTLPMetricExporter(endpoint=rotel_receiver.endpoint, timeout=5)
    try:
        assert exporter.export(metrics_data()) == MetricExportResult.SUCCESS
    finally:
        exporter.shutdown()

    def memory_arrived(store: Store) -> bool:
        return store.latest("hw.gpu.memory.usage") is not None

    util = rotel_receiver.store.wait_for(
        lambda s: s.latest("hw.gpu.utilization", {"hw.id": GPU}), timeout=10
    )
    assert util.value == 0.75
    rotel_receiver.store.wait_for(memory_arrived, timeout=10)
    assert_sample_metrics(rotel_receiver.store)
    # rotel's exporter compresses by default; the sniffing proxy must see it.
    assert rotel_receiver.store.received("metrics")[0].compression == "gzip"


def test_log_event_passes_through_rotel(rotel_receiver: RotelReceiver) -> None:
    exporter = OTLPLogExporter(endpoint=rotel_receiver.endpoint, timeout=5)
    try:
        assert exporter.export([xid_log()]) == LogRecordExportResult.SUCCESS
    finally:
        exporter.shutdown()
    rotel_receiver.store.wait_for(lambda s: s.logs("hw.gpu.xid"), timeout=10)
    assert_sample_log(rotel_receiver.store)
