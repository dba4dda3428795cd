"""The hand-written OTLP logs request equals the one opentelemetry-proto's generated classes
build for the same events (issue 41: the agent no longer loads protobuf for its events)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import KeyValue
from opentelemetry.proto.logs.v1 import logs_pb2
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.events import otlp_logs
from gpu_otel_agent.export.events.otlp_logs import LogEncoder
from gpu_otel_agent.export.otlp.scope import SCOPE
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from tests.unit.export.otlp.generated_values import any_value, proto_resource


def generated_request(resource: Resource, events: Sequence[HealthEvent],
                      observed: int) -> ExportLogsServiceRequest:
    """The request as the agent built it with the generated classes before issue 41."""
    request = ExportLogsServiceRequest()
    resource_logs = request.resource_logs.add(schema_url=resource.schema_url)
    resource_logs.resource.CopyFrom(proto_resource(resource))
    scope_logs = resource_logs.scope_logs.add(schema_url=SCOPE.schema_url or "")
    scope_logs.scope.name = SCOPE.name
    scope_logs.scope.version = SCOPE.version or ""
    for event in events:
        for attributes in event.records():
            record = scope_logs.log_records.add(
                time_unix_nano=event.time_ns,
                observed_time_unix_nano=observed,
                severity_number=event.severity.number,  # type: ignore[arg-type]
                severity_text=event.severity.text,
                event_name=event.name,
            )
            record.body.string_value = event.body
            record.attributes.extend(
                KeyValue(key=k, value=any_value(v)) for k, v in attributes)
    return request


def _event(rng: random.Random, index: int) -> HealthEvent:
    attributes: list[tuple[str, Any]] = [("hw.id", f"GPU-{index}"), ("gpu.index", index)]
    for n in range(rng.randrange(4)):
        attributes.append((f"gpu.extra.{n}", rng.choice(
            ["", "wörd", rng.randrange(-(1 << 40), 1 << 40), rng.uniform(-5, 5), True,
             (1, 2, 3), ("a", "b")])))
    workloads = tuple(
        (("process.pid", rng.randrange(1, 1 << 22)), ("k8s.pod.name", f"pod-{w}"))
        for w in range(rng.randrange(3)))
    return HealthEvent(rng.choice(["gpu.xid", "gpu.health", "gpu.row_remap"]),
                       rng.choice([0, 1_700_000_000_000_000_000 + rng.randrange(1 << 30)]),
                       rng.choice(list(Severity)), rng.choice(["", "XID 79 …", "b" * 300]),
                       tuple(attributes), workloads=workloads)


RESOURCES = [Resource.create({}), Resource.create({"service.name": "gpu-otel-agent",
                                                   "host.name": "node-1"}),
             Resource({"a": 1, "b": (1.5, 2.5)}, schema_url="https://opentelemetry.io/s/1.0")]


@pytest.mark.parametrize("seed", range(60))
def test_bytes_equal_the_generated_classes(seed: int) -> None:
    rng = random.Random(seed)
    resource = RESOURCES[seed % len(RESOURCES)]
    events = [_event(rng, i) for i in range(rng.randrange(0, 6))]
    observed = rng.choice([0, 1_700_000_000_500_000_000])
    ours = LogEncoder(resource).encode_bytes(events, observed)
    assert ours == generated_request(resource, events, observed).SerializeToString()


def test_an_int_outside_int64_raises_as_the_generated_classes_did() -> None:
    event = HealthEvent("gpu.xid", 1, Severity.FATAL, "x", (("big", 1 << 64),))
    with pytest.raises(ValueError):
        generated_request(RESOURCES[0], [event], 1)
    with pytest.raises(ValueError):
        LogEncoder(RESOURCES[0]).encode_bytes([event], 1)


def test_encode_is_the_message_of_the_bytes() -> None:
    event = _event(random.Random(1), 0)
    encoder = LogEncoder(RESOURCES[1])
    message = encoder.encode([event])
    (record,) = message.resource_logs[0].scope_logs[0].log_records[:1]
    assert record.event_name == event.name and record.body.string_value == event.body


CONTRACT: list[tuple[Any, str, int]] = [
    (ExportLogsServiceRequest, "resource_logs", otlp_logs.REQUEST_RESOURCE_LOGS),
    (logs_pb2.ResourceLogs, "resource", otlp_logs.RESOURCE_LOGS_RESOURCE),
    (logs_pb2.ResourceLogs, "scope_logs", otlp_logs.RESOURCE_LOGS_SCOPE_LOGS),
    (logs_pb2.ResourceLogs, "schema_url", otlp_logs.RESOURCE_LOGS_SCHEMA_URL),
    (logs_pb2.ScopeLogs, "scope", otlp_logs.SCOPE_LOGS_SCOPE),
    (logs_pb2.ScopeLogs, "log_records", otlp_logs.SCOPE_LOGS_LOG_RECORDS),
    (logs_pb2.ScopeLogs, "schema_url", otlp_logs.SCOPE_LOGS_SCHEMA_URL),
    (logs_pb2.LogRecord, "time_unix_nano", otlp_logs.RECORD_TIME),
    (logs_pb2.LogRecord, "severity_number", otlp_logs.RECORD_SEVERITY_NUMBER),
    (logs_pb2.LogRecord, "severity_text", otlp_logs.RECORD_SEVERITY_TEXT),
    (logs_pb2.LogRecord, "body", otlp_logs.RECORD_BODY),
    (logs_pb2.LogRecord, "attributes", otlp_logs.RECORD_ATTRIBUTES),
    (logs_pb2.LogRecord, "observed_time_unix_nano", otlp_logs.RECORD_OBSERVED_TIME),
    (logs_pb2.LogRecord, "event_name", otlp_logs.RECORD_EVENT_NAME),
]


@pytest.mark.parametrize(("message", "name", "tag"), CONTRACT,
                         ids=[f"{m.DESCRIPTOR.name}.{n}" for m, n, _ in CONTRACT])
def test_each_tag_is_the_installed_descriptors_field(message: Any, name: str, tag: int) -> None:
    assert tag >> 3 == message.DESCRIPTOR.fields_by_name[name].number
