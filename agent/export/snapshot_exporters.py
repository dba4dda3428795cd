"""What the pusher hands a snapshot to. Both run on the export thread, never on the loop."""

from __future__ import annotations

from typing import Protocol

from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.encode import encode
from gpu_otel_agent.export.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.senders import RequestExporter
from gpu_otel_agent.model.snapshot import NodeSnapshot


class SnapshotExporter(Protocol):
    def export(self, snapshot: NodeSnapshot, timeout_s: float) -> bool: ...

    def shutdown(self, timeout_s: float) -> None: ...


class OtlpSnapshotExporter:
    """Encodes straight to OTLP protobuf and sends through the SDK's transport."""

    def __init__(self, exporter: RequestExporter, encoder: ProtoEncoder) -> None:
        self._exporter = exporter
        self._encoder = encoder

    def export(self, snapshot: NodeSnapshot, timeout_s: float) -> bool:
        return self._exporter.send(self._encoder.encode(snapshot))

    def shutdown(self, timeout_s: float) -> None:
        if isinstance(self._exporter, MetricExporter):
            self._exporter.shutdown(timeout_millis=timeout_s * 1000)


class SdkSnapshotExporter:
    """Any SDK metric exporter (console, or OTLP where the fast path is unavailable)."""

    def __init__(self, exporter: MetricExporter, resource: Resource) -> None:
        self._exporter = exporter
        self._resource = resource

    def export(self, snapshot: NodeSnapshot, timeout_s: float) -> bool:
        data = encode(snapshot, self._resource)
        result = self._exporter.export(data, timeout_millis=timeout_s * 1000)
        return result is MetricExportResult.SUCCESS

    def shutdown(self, timeout_s: float) -> None:
        self._exporter.shutdown(timeout_millis=timeout_s * 1000)
