"""The contract of the OTLP fast path with the libraries under it; fails loudly when they move.

The agent writes OTLP protobuf partly by hand (``otlp_proto``) and sends it through public
APIs of ``h2`` (``grpc.unary_client``, ``grpc.connection``) with the method paths of
opentelemetry-proto's descriptors, or over ``http.client`` (``http_transport``). Every name
it relies on is checked here for presence and signature, the hand-written wire tags against
the installed descriptors, and the whole path by a real round trip to a local receiver whose
result must equal the SDK's own encoding. When the contract breaks, the agent falls back to
the SDK's exporter by itself (also checked here), and this file says which part moved.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.settings import Settings
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2
from opentelemetry.util.re import parse_env_headers

from gpu_otel_agent.config.load import load
from gpu_otel_agent.export.metrics import otlp_proto
from gpu_otel_agent.export.metrics.exporters import build_snapshot_exporter, fast_path_problem
from gpu_otel_agent.export.metrics.sdk_metrics import encode
from gpu_otel_agent.export.metrics.snapshot_exporters import (
    OtlpSnapshotExporter,
    SdkSnapshotExporter,
)
from gpu_otel_agent.export.otlp.senders import export_method
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.unit.export.metrics.test_otlp_proto import RESOURCE, _snapshot

# (callable, the keyword parameters the agent passes to it)
CALLED: tuple[tuple[Callable[..., Any], tuple[str, ...]], ...] = (
    (H2Configuration, ("client_side", "header_encoding")),
    (Settings, ("client", "initial_values")),
    (H2Connection.send_headers, ("stream_id", "headers")),
    (H2Connection.send_data, ("stream_id", "data", "end_stream")),
    (H2Connection.local_flow_control_window, ("stream_id",)),
    (H2Connection.acknowledge_received_data, ("acknowledged_size", "stream_id")),
    (H2Connection.increment_flow_control_window, ("increment",)),
    (H2Connection.reset_stream, ("stream_id", "error_code")),
    (parse_env_headers, ("s", "liberal")),
)


@pytest.mark.parametrize(("function", "parameters"), CALLED,
                         ids=[f.__name__ for f, _ in CALLED])
def test_public_functions_take_the_arguments_the_agent_passes(
    function: Callable[..., Any], parameters: tuple[str, ...]
) -> None:
    accepted = inspect.signature(function).parameters
    assert set(parameters) <= set(accepted), f"{function.__qualname__}{inspect.signature(function)}"


@pytest.mark.parametrize(("signal", "module", "service", "request_type"), [
    ("METRICS", metrics_service_pb2, "MetricsService",
     metrics_service_pb2.ExportMetricsServiceRequest),
    ("LOGS", logs_service_pb2, "LogsService", logs_service_pb2.ExportLogsServiceRequest),
])
def test_generated_services_export_the_request_types_the_agent_builds(
    signal: str, module: Any, service: str, request_type: Any
) -> None:
    method = module.DESCRIPTOR.services_by_name[service].methods_by_name["Export"]
    assert method.input_type is request_type.DESCRIPTOR
    # The path the gRPC transport calls, as the generated stubs spell it.
    assert export_method(signal) == (
        f"/opentelemetry.proto.collector.{signal.lower()}.v1.{service}/Export")


def test_hand_written_wire_tags_match_the_installed_descriptors() -> None:
    assert otlp_proto.wire_contract_problem() is None
    for message, name, tag in otlp_proto.wire_contract():
        field = message.DESCRIPTOR.fields_by_name[name]
        assert tag >> 3 == field.number, f"{message.DESCRIPTOR.full_name}.{name}"


@pytest.fixture
def receiver() -> Iterator[OtlpGrpcReceiver]:
    with OtlpGrpcReceiver() as running:
        yield running


def _export(receiver: OtlpGrpcReceiver, problem: str | None) -> tuple[object, object]:
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint}
    exporter = build_snapshot_exporter(load(None, environ={}), RESOURCE, environ,
                                       problem=problem)
    snapshot = _snapshot(42.0)
    try:
        assert exporter.export(snapshot, 10.0)
    finally:
        exporter.shutdown(1.0)
    return exporter, snapshot


def test_fast_path_round_trip_equals_the_sdk_encoding(receiver: OtlpGrpcReceiver) -> None:
    assert fast_path_problem(load(None, environ={}), {}) is None
    exporter, snapshot = _export(receiver, problem=None)
    assert isinstance(exporter, OtlpSnapshotExporter)
    (received,) = receiver.store.received()
    assert received.request == encode_metrics(encode(snapshot, RESOURCE))  # type: ignore[arg-type]


def test_sdk_fallback_is_chosen_when_the_contract_does_not_hold_and_delivers_the_same(
    receiver: OtlpGrpcReceiver, monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", receiver.endpoint)  # the SDK reads it
    exporter, snapshot = _export(receiver, problem="opentelemetry-proto changed")
    assert isinstance(exporter, SdkSnapshotExporter)
    (received,) = receiver.store.received()
    assert received.request == encode_metrics(encode(snapshot, RESOURCE))  # type: ignore[arg-type]


def test_an_sdk_credential_provider_selects_the_sdk_path() -> None:
    env = {"OTEL_PYTHON_EXPORTER_OTLP_GRPC_METRICS_CREDENTIAL_PROVIDER": "vault"}
    problem = fast_path_problem(load(None, environ={}), env)
    assert problem is not None and "OTEL_PYTHON_EXPORTER_OTLP_GRPC_METRICS" in problem
