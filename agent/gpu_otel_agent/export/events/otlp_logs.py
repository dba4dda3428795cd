"""Health events -> OTLP ``ExportLogsServiceRequest``: one LogRecord per workload an event hit
(one when it hit none; ``HealthEvent.records``).

The request is written in protobuf wire format by hand (``encode_bytes``), as the metric
encoder writes its own: building it through opentelemetry-proto's generated classes loaded
protobuf's upb runtime with the first event, 3.7 MiB of resident memory kept for the agent's
life and about 28 ms on the first event's path (issue 41). The bytes equal what the generated
classes wrote for the same events (tests/unit/export/events/test_otlp_logs_wire.py builds them
the old way and compares); ``encode`` parses them into the message for callers that look
inside (``gpu-agent check``, tests).
"""

from __future__ import annotations

import struct
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from gpu_otel_agent.export.otlp import wire_values
from gpu_otel_agent.export.otlp.scope import SCOPE
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.model.resource import ResourceView

if TYPE_CHECKING:
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

# Field tags of opentelemetry/proto/logs/v1/logs.proto and the logs service (checked against
# the installed descriptors by the test named above).
REQUEST_RESOURCE_LOGS = 0x0A  # ExportLogsServiceRequest.resource_logs = 1
RESOURCE_LOGS_RESOURCE = 0x0A  # ResourceLogs.resource = 1
RESOURCE_LOGS_SCOPE_LOGS = 0x12  # ResourceLogs.scope_logs = 2
RESOURCE_LOGS_SCHEMA_URL = 0x1A  # ResourceLogs.schema_url = 3
SCOPE_LOGS_SCOPE = 0x0A  # ScopeLogs.scope = 1
SCOPE_LOGS_LOG_RECORDS = 0x12  # ScopeLogs.log_records = 2
SCOPE_LOGS_SCHEMA_URL = 0x1A  # ScopeLogs.schema_url = 3
RECORD_TIME = 0x09  # LogRecord.time_unix_nano = 1, fixed64
RECORD_SEVERITY_NUMBER = 0x10  # LogRecord.severity_number = 2, enum
RECORD_SEVERITY_TEXT = 0x1A  # LogRecord.severity_text = 3
RECORD_BODY = 0x2A  # LogRecord.body = 5, AnyValue
RECORD_ATTRIBUTES = 0x32  # LogRecord.attributes = 6, KeyValue
RECORD_OBSERVED_TIME = 0x59  # LogRecord.observed_time_unix_nano = 11, fixed64
RECORD_EVENT_NAME = 0x62  # LogRecord.event_name = 12

_FIXED64 = struct.Struct("<BQ")


def _delimited(tag: int, payload: bytes) -> bytes:
    return bytes((tag,)) + wire_values.varint(len(payload)) + payload


def _string(tag: int, text: str) -> bytes:
    """A string field; proto3 leaves an empty one out, and so does this."""
    return _delimited(tag, text.encode()) if text else b""


def _fixed64(tag: int, value: int) -> bytes:
    return _FIXED64.pack(tag, value) if value else b""


class LogEncoder:
    def __init__(self, resource: ResourceView) -> None:
        # ResourceLogs' resource and schema_url, and ScopeLogs' scope and schema_url: the same
        # bytes in every request.
        self._resource = _delimited(RESOURCE_LOGS_RESOURCE, wire_values.resource(
            resource.attributes.items()))  # type: ignore[arg-type]
        self._resource_schema = _string(RESOURCE_LOGS_SCHEMA_URL, resource.schema_url or "")
        self._scope = _delimited(SCOPE_LOGS_SCOPE,
                                 wire_values.scope(SCOPE.name, SCOPE.version or ""))
        self._scope_schema = _string(SCOPE_LOGS_SCHEMA_URL, SCOPE.schema_url or "")

    def encode(self, events: Sequence[HealthEvent]) -> ExportLogsServiceRequest:
        """The request as a message (``gpu-agent check``, tests); the generated classes are
        imported here only."""
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
            ExportLogsServiceRequest,
        )

        return ExportLogsServiceRequest.FromString(self.encode_bytes(events))

    def encode_bytes(self, events: Sequence[HealthEvent], observed_ns: int | None = None) -> bytes:
        """The serialised ``ExportLogsServiceRequest``, fields in field-number order as
        ``SerializeToString`` writes them; ``observed_ns`` (default: now) is every record's
        observed time. Raises ValueError (an int outside int64), UnicodeError (a lone
        surrogate) or TypeError as the generated classes did for a value they cannot take."""
        observed = time.time_ns() if observed_ns is None else observed_ns
        records: list[bytes] = []
        for event in events:
            head = (_fixed64(RECORD_TIME, event.time_ns)
                    + (bytes((RECORD_SEVERITY_NUMBER,)) + wire_values.varint(
                        event.severity.number) if event.severity.number else b"")
                    + _string(RECORD_SEVERITY_TEXT, event.severity.text)
                    + _delimited(RECORD_BODY, wire_values.any_value(event.body)))
            tail = (_fixed64(RECORD_OBSERVED_TIME, observed)
                    + _string(RECORD_EVENT_NAME, event.name))
            for attributes in event.records():
                record = b"".join((head, *(_delimited(RECORD_ATTRIBUTES,
                                                      wire_values.key_value(k, v))
                                            for k, v in attributes), tail))
                records.append(_delimited(SCOPE_LOGS_LOG_RECORDS, record))
        scope_logs = b"".join((self._scope, *records, self._scope_schema))
        resource_logs = (self._resource + _delimited(RESOURCE_LOGS_SCOPE_LOGS, scope_logs)
                         + self._resource_schema)
        return _delimited(REQUEST_RESOURCE_LOGS, resource_logs)
