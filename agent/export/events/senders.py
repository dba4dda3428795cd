"""Where health events go: OTLP logs (gRPC or HTTP, same settings as the metrics) or stdout.

The OTLP senders subclass the SDK's log exporters, as ``senders.py`` does for metrics, so
the standard ``OTEL_EXPORTER_OTLP_*`` / ``OTEL_EXPORTER_OTLP_LOGS_*`` variables, TLS, headers,
compression and retries behave as in every OpenTelemetry SDK. They block; the event pusher
calls them on its own thread. The HTTP one is built on first use: a gRPC agent (the default)
need not hold the SDK's HTTP package in memory.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.sdk._logs.export import LogRecordExportResult
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.export.events.encode import LogEncoder
from gpu_otel_agent.export.exporters import otlp_settings
from gpu_otel_agent.gpu_health.events import HealthEvent


class EventSender(Protocol):
    def send(self, events: Sequence[HealthEvent]) -> bool:
        """True when the collector accepted every event."""

    def shutdown(self) -> None: ...


class _GrpcLogs(OTLPLogExporter):
    def _translate_data(self, data: Any) -> ExportLogsServiceRequest:
        if isinstance(data, ExportLogsServiceRequest):
            return data  # encoded by gpu_otel_agent.export.events.encode
        result: ExportLogsServiceRequest = super()._translate_data(data)
        return result

    def _count_data(self, data: Any) -> int:
        if isinstance(data, ExportLogsServiceRequest):
            return sum(len(s.log_records) for r in data.resource_logs for s in r.scope_logs)
        return len(data)

    def send(self, request: ExportLogsServiceRequest) -> bool:
        return self._export(request) is LogRecordExportResult.SUCCESS  # type: ignore[arg-type]


class _HttpTransport(Protocol):
    def send(self, request: ExportLogsServiceRequest) -> bool: ...

    def shutdown(self) -> None: ...


def _http_logs(**kwargs: Any) -> _HttpTransport:
    from gpu_otel_agent.export.http_senders import HttpLogs

    return HttpLogs(**kwargs)


class OtlpEventSender:
    def __init__(self, transport: _GrpcLogs | _HttpTransport, encoder: LogEncoder) -> None:
        self._transport = transport
        self._encoder = encoder

    def send(self, events: Sequence[HealthEvent]) -> bool:
        return self._transport.send(self._encoder.encode(events))

    def shutdown(self) -> None:
        self._transport.shutdown()


class ConsoleEventSender:
    """``exporter: console``: one JSON object per event on stdout, named as in OTLP."""

    def send(self, events: Sequence[HealthEvent]) -> bool:
        for event in events:
            record = {
                "event_name": event.name,
                "time_unix_nano": event.time_ns,
                "severity_text": event.severity.text,
                "body": event.body,
                "attributes": {k: list(v) if isinstance(v, tuple) else v
                               for k, v in event.all_attributes()},
            }
            sys.stdout.write(json.dumps(record) + "\n")
        sys.stdout.flush()
        return True

    def shutdown(self) -> None:
        return None


def build_event_sender(
    config: AgentConfig, resource: Resource, environ: Mapping[str, str] | None = None
) -> EventSender:
    env = os.environ if environ is None else environ
    if config.exporter == "console":
        return ConsoleEventSender()
    protocol, kwargs = otlp_settings(config, env, "LOGS")
    transport: _GrpcLogs | _HttpTransport = (
        _GrpcLogs(**kwargs) if protocol == "grpc" else _http_logs(**kwargs))
    return OtlpEventSender(transport, LogEncoder(resource))
