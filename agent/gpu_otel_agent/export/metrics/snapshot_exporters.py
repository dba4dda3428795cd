"""What the pusher hands a snapshot to. Both run on the export thread, never on the loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.metrics.sdk_metrics import encode
from gpu_otel_agent.export.otlp.senders import RequestSender
from gpu_otel_agent.model.resource import ResourceView
from gpu_otel_agent.model.snapshot import NodeSnapshot
from gpu_otel_agent.threads.costs import ENCODING, SENDING, Stage

if TYPE_CHECKING:  # imported by the SDK path only when used (sdk_metrics says why)
    from opentelemetry.sdk.metrics.export import MetricExporter


class SnapshotExporter(Protocol):
    def export(self, snapshot: NodeSnapshot, timeout_s: float) -> bool: ...

    def shutdown(self, timeout_s: float) -> None: ...


class NoSnapshotExporter:
    """``exporter: none``: the snapshot stays local (Prometheus, ``gpu-agent top``)."""

    def export(self, snapshot: NodeSnapshot, timeout_s: float) -> bool:
        return True

    def shutdown(self, timeout_s: float) -> None:
        return None


class OtlpSnapshotExporter:
    """Encodes straight to OTLP protobuf and sends it itself (see ``otlp.senders``)."""

    def __init__(self, sender: RequestSender, encoder: ProtoEncoder) -> None:
        self._sender = sender
        self._encoder = encoder

    def export(self, snapshot: NodeSnapshot, timeout_s: float) -> bool:
        # The caller's deadline reaches the wire (gRPC deadline, HTTP socket timeout). The
        # request is the encoder's buffer, sent in place before the next export writes it.
        with Stage(ENCODING):
            request = self._encoder.encode_request(snapshot)
        with Stage(SENDING):
            return self._sender.send(request, timeout_s).ok

    def shutdown(self, timeout_s: float) -> None:
        self._sender.shutdown()


class SdkSnapshotExporter:
    """Any SDK metric exporter (console, or OTLP where the fast path is unavailable).

    The SDK's OTLP exporters bound an export by their configured timeout; the gRPC one does
    not take ``timeout_millis`` into account (an SDK to-do), so ``timeout_s`` is passed for
    the exporters that do.
    """

    def __init__(self, exporter: MetricExporter, resource: ResourceView) -> None:
        self._exporter = exporter
        self._resource = resource

    def export(self, snapshot: NodeSnapshot, timeout_s: float) -> bool:
        from opentelemetry.sdk.metrics.export import MetricExportResult

        data = encode(snapshot, self._resource)
        result = self._exporter.export(data, timeout_millis=timeout_s * 1000)
        return result is MetricExportResult.SUCCESS

    def shutdown(self, timeout_s: float) -> None:
        self._exporter.shutdown(timeout_millis=timeout_s * 1000)
