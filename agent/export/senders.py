"""The SDK's OTLP exporters, taught to send a request the agent has already encoded.

Subclassing keeps everything the SDK does for the standard ``OTEL_EXPORTER_OTLP_*`` variables
(endpoint, headers, TLS, compression, timeout, retries with back-off). The hooks used are
internal to the SDK; ``sends_requests`` checks they exist, and without them the agent falls
back to the SDK's own encoding.

The HTTP exporter lives in ``http_senders`` and is imported only when asked for: the SDK's
HTTP package (and its transport) costs about 2 MiB of resident memory that a gRPC agent,
the default, never uses.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.sdk.metrics.export import MetricExportResult


@runtime_checkable
class RequestExporter(Protocol):
    def sends_requests(self) -> bool: ...

    def send(self, request: ExportMetricsServiceRequest) -> bool: ...


_GRPC_HOOKS = ("_translate_data", "_count_data", "_export")


def _count_points(request: ExportMetricsServiceRequest) -> int:
    count = 0
    for resource_metrics in request.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                count += len(metric.gauge.data_points) + len(metric.sum.data_points)
    return count


class GrpcRequestExporter(OTLPMetricExporter):
    def sends_requests(self) -> bool:
        return all(hasattr(OTLPMetricExporter, hook) for hook in _GRPC_HOOKS)

    def _count_data(self, data: Any) -> int:
        if isinstance(data, ExportMetricsServiceRequest):
            return _count_points(data)  # the SDK's own self-metrics count data points
        counted: int = super()._count_data(data)
        return counted

    def _translate_data(self, data: Any) -> ExportMetricsServiceRequest:
        if isinstance(data, ExportMetricsServiceRequest):
            return data  # already encoded by gpu_otel_agent.export.otlp_proto
        result: ExportMetricsServiceRequest = super()._translate_data(data)
        return result

    def send(self, request: ExportMetricsServiceRequest) -> bool:
        # _export takes what _translate_data (above) accepts: our request passes through.
        result = self._export(request)  # type: ignore[arg-type]
        return bool(result is MetricExportResult.SUCCESS)

