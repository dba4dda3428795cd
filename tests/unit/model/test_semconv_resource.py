"""The resource and schema every signal carries (semantic conventions v1.44.0)."""

from __future__ import annotations

import socket
import uuid

from gpu_otel_agent.export.events.otlp_logs import LogEncoder
from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.model.semconv import SCHEMA_URL, agent_resource
from gpu_otel_agent.model.snapshot import AgentSample, NodeSnapshot, Reading


def test_schema_url_is_the_published_form_of_the_targeted_release() -> None:
    # open-telemetry/semantic-conventions v1.44.0 schemas/1.44.0: "schema_url: <this>".
    assert SCHEMA_URL == "https://opentelemetry.io/schemas/1.44.0"


def test_host_name_is_the_node_not_the_agent_pod() -> None:
    resource = agent_resource("gpu-node-7").attributes
    assert resource["host.name"] == resource["k8s.node.name"] == "gpu-node-7"
    assert agent_resource(None).attributes["host.name"] == socket.gethostname()
    assert "k8s.node.name" not in agent_resource(None).attributes
    assert "gpu.driver.version" not in resource  # per device now: hw.driver_version


def test_service_instance_id_is_a_uuid5_stable_per_node() -> None:
    first = agent_resource("gpu-node-7").attributes["service.instance.id"]
    again = agent_resource("gpu-node-7").attributes["service.instance.id"]
    other = agent_resource("gpu-node-8").attributes["service.instance.id"]
    assert first == again != other
    parsed = uuid.UUID(str(first))
    assert parsed.version == 5
    # The namespace the conventions give for a v5 service.instance.id.
    assert parsed == uuid.uuid5(uuid.UUID("4d63009a-8d0f-11ee-aad7-4c796ed8e320"),
                                "gpu-otel-agent/gpu-node-7")


def test_metrics_and_logs_carry_the_schema_url_on_resource_and_scope() -> None:
    resource = agent_resource("gpu-node-7")
    snapshot = NodeSnapshot(devices=(), taken_ns=1, agent=AgentSample(
        (Reading("gpu_agent.scrapes", 1),), start_time_ns=1, time_ns=1))
    metrics = ProtoEncoder(resource).encode(snapshot)
    (resource_metrics,) = metrics.resource_metrics
    assert resource_metrics.schema_url == SCHEMA_URL
    assert [s.schema_url for s in resource_metrics.scope_metrics] == [SCHEMA_URL]
    logs = LogEncoder(resource).encode([HealthEvent("gpu.lost", 1, Severity.ERROR, "lost", ())])
    (resource_logs,) = logs.resource_logs
    assert resource_logs.schema_url == SCHEMA_URL
    assert [s.schema_url for s in resource_logs.scope_logs] == [SCHEMA_URL]
