"""Health events -> OTLP ``ExportLogsServiceRequest``: one LogRecord per workload an event hit
(one when it hit none; ``HealthEvent.records``)."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.otlp.scope import SCOPE
from gpu_otel_agent.gpu_health.events import HealthEvent

if TYPE_CHECKING:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.resource.v1.resource_pb2 import Resource as ProtoResource


class LogEncoder:
    def __init__(self, resource: Resource) -> None:
        self._sdk_resource = resource
        self._resource: ProtoResource | None = None  # built with the first event's request
        self._schema_url = resource.schema_url

    def encode(self, events: Sequence[HealthEvent]) -> ExportLogsServiceRequest:
        # The generated classes are imported with the first event, not at start-up: they load
        # protobuf's upb runtime (3.7 MiB resident), which an agent whose GPUs stay healthy
        # never needs (the metric path writes its bytes by hand: export/otlp/wire_values).
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceRequest,
        )
        from opentelemetry.proto.common.v1.common_pb2 import KeyValue

        from gpu_otel_agent.export.otlp.proto_values import any_value, proto_resource

        if self._resource is None:
            self._resource = proto_resource(self._sdk_resource)
        request = ExportLogsServiceRequest()
        resource_logs = request.resource_logs.add(schema_url=self._schema_url)
        resource_logs.resource.CopyFrom(self._resource)
        scope_logs = resource_logs.scope_logs.add(schema_url=SCOPE.schema_url or "")
        scope_logs.scope.name = SCOPE.name
        scope_logs.scope.version = SCOPE.version or ""
        observed = time.time_ns()
        for event in events:
            for attributes in event.records():
                record = scope_logs.log_records.add(
                    time_unix_nano=event.time_ns,
                    observed_time_unix_nano=observed,
                    severity_number=event.severity.number,
                    severity_text=event.severity.text,
                    event_name=event.name,
                )
                record.body.string_value = event.body
                record.attributes.extend(
                    KeyValue(key=k, value=any_value(v)) for k, v in attributes)
        return request
