"""Health events -> OTLP ``ExportLogsServiceRequest`` (one LogRecord per event)."""

from __future__ import annotations

import time
from collections.abc import Sequence

from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, ArrayValue, KeyValue
from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ProtoResource
from opentelemetry.sdk.resources import Resource

from agent.export.encode import SCOPE
from agent.health.events import EventValue, HealthEvent


def _any_value(value: EventValue) -> AnyValue:
    if isinstance(value, bool):
        return AnyValue(bool_value=value)
    if isinstance(value, str):
        return AnyValue(string_value=value)
    if isinstance(value, int):
        return AnyValue(int_value=value)
    if isinstance(value, float):
        return AnyValue(double_value=value)
    return AnyValue(array_value=ArrayValue(values=[_any_value(v) for v in value]))


class LogEncoder:
    def __init__(self, resource: Resource) -> None:
        self._resource = ProtoResource(
            attributes=[KeyValue(key=k, value=_any_value(v))  # type: ignore[arg-type]
                        for k, v in resource.attributes.items()]
        )
        self._schema_url = resource.schema_url

    def encode(self, events: Sequence[HealthEvent]) -> ExportLogsServiceRequest:
        request = ExportLogsServiceRequest()
        resource_logs = request.resource_logs.add(schema_url=self._schema_url)
        resource_logs.resource.CopyFrom(self._resource)
        scope_logs = resource_logs.scope_logs.add()
        scope_logs.scope.name = SCOPE.name
        scope_logs.scope.version = SCOPE.version or ""
        observed = time.time_ns()
        for event in events:
            record = scope_logs.log_records.add(
                time_unix_nano=event.time_ns,
                observed_time_unix_nano=observed,
                severity_number=event.severity.number,
                severity_text=event.severity.text,
                event_name=event.name,
            )
            record.body.string_value = event.body
            record.attributes.extend(
                KeyValue(key=k, value=_any_value(v)) for k, v in event.all_attributes())
        return request
