"""The SDK's OTLP/HTTP exporters (metrics, logs), taught to send an already encoded request.

Apart from ``senders`` so that a gRPC agent (the default) never imports the SDK's HTTP
package; see ``senders`` and ``event_senders`` for why the SDK exporters are subclassed.
"""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.http._log_exporter import (
    OTLPLogExporter as HttpOTLPLogExporter,
)
from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
    OTLPMetricExporter as HttpOTLPMetricExporter,
)
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.sdk.metrics.export import MetricExportResult


class HttpRequestExporter(HttpOTLPMetricExporter):
    def sends_requests(self) -> bool:
        return hasattr(HttpOTLPMetricExporter, "_export_batch")

    def send(self, request: ExportMetricsServiceRequest) -> bool:
        if self._shutdown:
            return False
        return bool(self._export_batch(request) is MetricExportResult.SUCCESS)


class HttpLogs(HttpOTLPLogExporter):
    def send(self, request: ExportLogsServiceRequest) -> bool:
        if self._shutdown:
            return False
        return bool(self._client.export(request.SerializeToString()).success)
