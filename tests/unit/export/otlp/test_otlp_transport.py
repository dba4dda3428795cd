"""The agent's own OTLP transports against real receivers: settings, retries, the deadline.

The reference is the OpenTelemetry SDK's exporter: under the same environment it must deliver
the same headers and compression to the same receiver. Deadlines are checked where gRPC puts
them, at the server (``grpc-timeout`` becomes the handler's ``time_remaining``), and by
ordering: an export to a collector that never answers ends after its timeout, not before and
not much after (margins are generous; speed is the benchmark's business).
"""

from __future__ import annotations

import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import grpc
import pytest
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.config.load import load
from gpu_otel_agent.export.events.otlp_logs import LogEncoder
from gpu_otel_agent.export.metrics.exporters import build_snapshot_exporter
from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.metrics.sdk_metrics import encode
from gpu_otel_agent.export.otlp.senders import build_request_sender
from gpu_otel_agent.export.otlp.target import ExporterConfigError, OtlpTarget, resolve_target
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.model.snapshot import NodeSnapshot
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.otlp_http import OtlpHttpReceiver
from tests.unit.export.metrics.test_otlp_proto import RESOURCE, _snapshot

# Generous: a loaded 2-core machine may be slow to schedule, never this slow.
MARGIN_S = 10.0


def _target(protocol: str, endpoint: str, signal: str = "METRICS",
            **env: str) -> OtlpTarget:
    environ = {"OTEL_EXPORTER_OTLP_PROTOCOL": protocol, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
               **env}
    return resolve_target(load(None, environ={}), environ, signal)


# --- settings -------------------------------------------------------------------------------


def test_signal_variable_wins_over_generic_wins_over_file(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("otlp: {endpoint: 'http://file:4318', protocol: http/protobuf, "
                    "headers: {x-tenant: file}, timeout: 4, compression: gzip}\n")
    config = load(path, environ={})
    from_file = resolve_target(config, {}, "METRICS")
    assert from_file.endpoint == "http://file:4318/v1/metrics"
    assert from_file.headers == (("x-tenant", "file"),)
    assert (from_file.timeout_s, from_file.compression) == (4.0, "gzip")
    env = {"OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=generic",
           "OTEL_EXPORTER_OTLP_LOGS_HEADERS": "X-Tenant=logs%20only",
           "OTEL_EXPORTER_OTLP_TIMEOUT": "2.5",
           "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": "http://logs:9999/custom"}
    metrics, logs = resolve_target(config, env, "METRICS"), resolve_target(config, env, "LOGS")
    assert metrics.headers == (("x-tenant", "generic"),)
    assert logs.headers == (("x-tenant", "logs only"),)
    assert metrics.timeout_s == logs.timeout_s == 2.5
    assert logs.endpoint == "http://logs:9999/custom"  # a signal's own URL is used as given
    assert metrics.endpoint == "http://file:4318/v1/metrics"


@pytest.mark.parametrize(("endpoint", "insecure", "expected"), [
    ("http://collector:4317", None, ("collector:4317", False)),
    ("https://collector:4317", "true", ("collector:4317", True)),  # the scheme decides
    ("collector:4317", None, ("collector:4317", True)),
    ("collector:4317", "true", ("collector:4317", False)),
])
def test_grpc_endpoint_scheme_and_insecure(endpoint: str, insecure: str | None,
                                           expected: tuple[str, bool]) -> None:
    env = {} if insecure is None else {"OTEL_EXPORTER_OTLP_INSECURE": insecure}
    target = _target("grpc", endpoint, **env)
    assert (target.endpoint, target.tls) == expected


@pytest.mark.parametrize(("name", "value", "message"), [
    ("OTEL_EXPORTER_OTLP_METRICS_TIMEOUT", "soon", "OTEL_EXPORTER_OTLP_METRICS_TIMEOUT"),
    ("OTEL_EXPORTER_OTLP_TIMEOUT", "0", "positive"),
    ("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd", "OTEL_EXPORTER_OTLP_COMPRESSION"),
])
def test_bad_settings_name_the_variable(name: str, value: str, message: str) -> None:
    with pytest.raises(ExporterConfigError, match=message):
        _target("grpc", "http://localhost:4317", **{name: value})


def test_deflate_is_refused_over_grpc_but_not_http() -> None:
    with pytest.raises(ExporterConfigError, match="grpc"):
        _target("grpc", "http://x:4317", OTEL_EXPORTER_OTLP_COMPRESSION="deflate")
    assert _target("http/protobuf", "http://x:4318",
                   OTEL_EXPORTER_OTLP_COMPRESSION="deflate").compression == "deflate"


# --- round trips ----------------------------------------------------------------------------


def _send_message_then_bytes(target: OtlpTarget, snapshot: NodeSnapshot) -> None:
    """Sends the snapshot twice on one sender (one kept-alive connection): as a message, then
    as the bytes the exporter sends, which must go out as they are."""
    sender = build_request_sender(target)
    try:
        assert sender.send(ProtoEncoder(RESOURCE).encode(snapshot)).ok
        assert sender.send(ProtoEncoder(RESOURCE).encode_bytes(snapshot)).ok
    finally:
        sender.shutdown()


@pytest.mark.parametrize("compression", ["none", "gzip"])
def test_grpc_delivers_what_the_sdk_would_encode(grpc_receiver: OtlpGrpcReceiver,
                                                 compression: str) -> None:
    snapshot = _snapshot(123.0)
    _send_message_then_bytes(_target(
        "grpc", grpc_receiver.endpoint, OTEL_EXPORTER_OTLP_HEADERS="x-tenant=a,x-other=b",
        OTEL_EXPORTER_OTLP_COMPRESSION=compression), snapshot)
    as_message, as_bytes = grpc_receiver.store.received()
    for received in (as_message, as_bytes):
        assert received.request == encode_metrics(encode(snapshot, RESOURCE))
        assert (received.metadata["x-tenant"], received.metadata["x-other"]) == ("a", "b")
        assert received.compression == (None if compression == "none" else "gzip")


@pytest.mark.parametrize("compression", ["none", "gzip", "deflate"])
def test_http_delivers_what_the_sdk_would_encode(http_receiver: OtlpHttpReceiver,
                                                 compression: str) -> None:
    snapshot = _snapshot(7.0)
    _send_message_then_bytes(_target(
        "http/protobuf", http_receiver.endpoint, OTEL_EXPORTER_OTLP_HEADERS="x-tenant=a",
        OTEL_EXPORTER_OTLP_COMPRESSION=compression), snapshot)
    first, second = http_receiver.store.received()
    assert first.request == second.request == encode_metrics(encode(snapshot, RESOURCE))
    assert first.metadata["x-tenant"] == "a"
    assert first.metadata["content-type"] == "application/x-protobuf"
    assert first.compression == (None if compression == "none" else compression)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_logs_go_to_the_logs_service(grpc_receiver: OtlpGrpcReceiver,
                                     http_receiver: OtlpHttpReceiver, protocol: str) -> None:
    receiver = grpc_receiver if protocol == "grpc" else http_receiver
    event = HealthEvent("gpu.xid", 1, Severity.FATAL, "XID 79", (("gpu.index", 0),))
    request = LogEncoder(Resource.create({})).encode([event])
    sender = build_request_sender(_target(protocol, receiver.endpoint, "LOGS"))
    try:
        assert sender.send(request).ok
    finally:
        sender.shutdown()
    (received,) = receiver.store.received()
    assert (received.signal, received.request) == ("logs", request)


def _sdk_and_ours(monkeypatch: pytest.MonkeyPatch, receiver: Any, env: dict[str, str],
                  *, problem: str | None) -> Any:
    for name, value in env.items():
        monkeypatch.setenv(name, value)  # the SDK exporter reads os.environ itself
    exporter = build_snapshot_exporter(load(None, environ={}), RESOURCE, env, problem=problem)
    try:
        assert exporter.export(_snapshot(1.0), 5.0)
    finally:
        exporter.shutdown(1.0)
    return receiver.store.received()[-1]


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_same_headers_compression_and_payload_as_the_sdk_exporter(
    monkeypatch: pytest.MonkeyPatch, grpc_receiver: OtlpGrpcReceiver,
    http_receiver: OtlpHttpReceiver, protocol: str,
) -> None:
    receiver = grpc_receiver if protocol == "grpc" else http_receiver
    env = {"OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
           "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
           "OTEL_EXPORTER_OTLP_HEADERS": "x-tenant=t%201,authorization=Bearer x",
           "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION": "gzip"}
    sdk = _sdk_and_ours(monkeypatch, receiver, env, problem="the SDK, as the reference")
    ours = _sdk_and_ours(monkeypatch, receiver, env, problem=None)
    assert ours.request == sdk.request
    assert ours.compression == sdk.compression == "gzip"
    for key in ("x-tenant", "authorization", "content-type", "content-encoding"):
        assert ours.metadata.get(key) == sdk.metadata.get(key), key


# --- retries --------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_retries_a_retryable_refusal_until_accepted(
    grpc_receiver: OtlpGrpcReceiver, http_receiver: OtlpHttpReceiver, protocol: str
) -> None:
    receiver: Any = grpc_receiver if protocol == "grpc" else http_receiver
    receiver.reject()  # UNAVAILABLE / 503
    sender = build_request_sender(_target(protocol, receiver.endpoint,
                                          OTEL_EXPORTER_OTLP_TIMEOUT="30"))
    outcome: list[bool] = []
    worker = threading.Thread(
        target=lambda: outcome.append(sender.send(ProtoEncoder(RESOURCE).encode(_snapshot(1))).ok))
    worker.start()
    try:
        receiver.store.wait_for(lambda s: s.received(accepted=None) or None, timeout=MARGIN_S)
        receiver.accept()
        worker.join(30 + MARGIN_S)
    finally:
        sender.shutdown()
    assert outcome == [True]
    accepted = [r.accepted for r in receiver.store.received(accepted=None)]
    assert accepted[0] is False and accepted[-1] is True


def test_a_final_refusal_is_not_retried(grpc_receiver: OtlpGrpcReceiver) -> None:
    grpc_receiver.reject(grpc.StatusCode.INVALID_ARGUMENT)
    sender = build_request_sender(_target("grpc", grpc_receiver.endpoint))
    try:
        assert not sender.send(ProtoEncoder(RESOURCE).encode(_snapshot(1))).ok
    finally:
        sender.shutdown()
    assert len(grpc_receiver.store.received(accepted=None)) == 1


class _GarbledRetryInfo(metrics_service_pb2_grpc.MetricsServiceServicer):
    """Refuses with UNAVAILABLE and a ``RetryInfo`` trailer that is not a RetryInfo."""

    def __init__(self) -> None:
        self.calls = 0

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC name
        self.calls += 1
        context.set_trailing_metadata((("google.rpc.retryinfo-bin", b"\xff\xff\xff"),))
        context.abort(grpc.StatusCode.UNAVAILABLE, "busy")


def test_a_garbled_retry_info_from_the_collector_is_a_failed_export_not_a_crash() -> None:
    # The trailer is the collector's to write; a bad one must not raise out of the sender.
    servicer = _GarbledRetryInfo()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sender = build_request_sender(_target("grpc", f"http://127.0.0.1:{port}",
                                          OTEL_EXPORTER_OTLP_TIMEOUT="1"))
    try:
        assert sender.send(ProtoEncoder(RESOURCE).encode(_snapshot(1))).ok is False
    finally:
        sender.shutdown()
        server.stop(None).wait(5)
    assert servicer.calls >= 1


# --- the deadline reaches the wire ----------------------------------------------------------


class _StallingMetrics(metrics_service_pb2_grpc.MetricsServiceServicer):
    """Never answers until released; records the deadline each call arrived with."""

    def __init__(self) -> None:
        self.remaining: list[float] = []
        self.arrived = threading.Event()
        self.release = threading.Event()

    def Export(self, request: Any, context: Any) -> Any:  # noqa: N802 - gRPC name
        self.remaining.append(float(context.time_remaining()))
        self.arrived.set()
        self.release.wait(60)
        return metrics_service_pb2.ExportMetricsServiceResponse()


@pytest.fixture
def stalling_grpc() -> Iterator[tuple[str, _StallingMetrics]]:
    servicer = _StallingMetrics()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", servicer
    finally:
        servicer.release.set()
        server.stop(None).wait(5)


@pytest.mark.parametrize(("configured", "per_call", "expected"), [
    (3.0, None, 3.0),  # OTEL_EXPORTER_OTLP_TIMEOUT alone
    (30.0, 2.0, 2.0),  # the pusher's shorter deadline wins
])
def test_grpc_deadline_at_the_server_is_the_configured_one(
    stalling_grpc: tuple[str, _StallingMetrics], configured: float, per_call: float | None,
    expected: float,
) -> None:
    endpoint, servicer = stalling_grpc
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint, "OTEL_EXPORTER_OTLP_TIMEOUT": str(configured)}
    # As the pusher calls it: the snapshot exporter, with the pusher's deadline.
    exporter = build_snapshot_exporter(load(None, environ={}), RESOURCE, env)
    started = time.monotonic()
    try:
        ok = exporter.export(_snapshot(1), 60.0 if per_call is None else per_call)
    finally:
        exporter.shutdown(1.0)
    elapsed = time.monotonic() - started
    assert not ok
    # What the server was told (grpc-timeout) is the deadline, less the time in transit;
    # gRPC rounds the header's value up to its unit, hence the 5 % above.
    (remaining,) = servicer.remaining  # and no retry after the deadline passed
    assert expected / 2 < remaining <= expected * 1.05
    assert expected * 0.9 <= elapsed < expected + MARGIN_S


def _silent_server() -> tuple[socket.socket, str]:
    """Accepts connections and reads, never answers: a collector that hangs."""
    listener = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            held.append(connection)

    threading.Thread(target=accept, daemon=True).start()
    return listener, f"http://127.0.0.1:{listener.getsockname()[1]}"


@pytest.mark.parametrize(("configured", "per_call", "expected"), [
    (2.0, None, 2.0),
    (30.0, 1.5, 1.5),
])
def test_http_export_to_a_hung_collector_ends_at_its_timeout(
    configured: float, per_call: float | None, expected: float
) -> None:
    listener, endpoint = _silent_server()
    sender = build_request_sender(_target("http/protobuf", endpoint,
                                          OTEL_EXPORTER_OTLP_TIMEOUT=str(configured)))
    started = time.monotonic()
    try:
        ok = sender.send(ProtoEncoder(RESOURCE).encode(_snapshot(1)), per_call).ok
    finally:
        sender.shutdown()
        listener.close()
    elapsed = time.monotonic() - started
    assert not ok
    # Not before the timeout (the socket timeout is what is left of it), and not much after.
    assert expected * 0.9 <= elapsed < expected + MARGIN_S


def _trickling_server(seconds: float) -> tuple[socket.socket, str]:
    """Answers every request one byte at a time, each within any socket timeout, so the
    whole answer takes ``seconds``: a collector that is slow, not silent."""
    listener = socket.create_server(("127.0.0.1", 0))
    answer = b"HTTP/1.1 200 OK\r\n" + b"X-Pad: " + b"." * 40 + b"\r\nContent-Length: 0\r\n\r\n"

    def serve(connection: socket.socket) -> None:
        with connection:
            try:
                connection.recv(1 << 16)
                for byte in answer:
                    connection.sendall(bytes([byte]))
                    time.sleep(seconds / len(answer))
            except OSError:
                return

    def accept() -> None:
        while True:
            try:
                connection, _ = listener.accept()
            except OSError:
                return
            threading.Thread(target=serve, args=(connection,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener, f"http://127.0.0.1:{listener.getsockname()[1]}"


def test_http_export_to_a_trickling_collector_ends_at_its_timeout() -> None:
    # The socket timeout bounds each read; the deadline must bound the whole answer.
    trickle_s = 2.0 + MARGIN_S + 10.0
    listener, endpoint = _trickling_server(trickle_s)
    sender = build_request_sender(_target("http/protobuf", endpoint,
                                          OTEL_EXPORTER_OTLP_TIMEOUT="2"))
    started = time.monotonic()
    try:
        ok = sender.send(ProtoEncoder(RESOURCE).encode(_snapshot(1))).ok
    finally:
        sender.shutdown()
        listener.close()
    elapsed = time.monotonic() - started
    assert not ok
    assert 2.0 * 0.9 <= elapsed < 2.0 + MARGIN_S  # the trickle would take trickle_s


def test_shutdown_ends_a_retry_wait(grpc_receiver: OtlpGrpcReceiver) -> None:
    grpc_receiver.reject()
    sender = build_request_sender(_target("grpc", grpc_receiver.endpoint,
                                          OTEL_EXPORTER_OTLP_TIMEOUT="60"))
    outcome: list[bool] = []
    worker = threading.Thread(
        target=lambda: outcome.append(sender.send(ProtoEncoder(RESOURCE).encode(_snapshot(1))).ok))
    worker.start()
    grpc_receiver.store.wait_for(lambda s: s.received(accepted=None) or None, timeout=MARGIN_S)
    sender.shutdown()
    worker.join(MARGIN_S)  # far less than the 60 s of retries it had left
    assert outcome == [False]


# --- TLS over HTTP (gRPC TLS: tests/integration/test_agent_tls.py) --------------------------


class _Accepting(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()


@pytest.fixture
def https_endpoint(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Accepting)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()


def test_https_verifies_the_collector_with_the_configured_ca(
    https_endpoint: tuple[str, Path],
) -> None:
    endpoint, cert = https_endpoint
    request = ProtoEncoder(RESOURCE).encode(_snapshot(1))
    trusted = build_request_sender(_target("http/protobuf", endpoint,
                                           OTEL_EXPORTER_OTLP_CERTIFICATE=str(cert)))
    untrusted = build_request_sender(_target("http/protobuf", endpoint,
                                             OTEL_EXPORTER_OTLP_TIMEOUT="60"))
    try:
        assert trusted.send(request).ok
        started = time.monotonic()
        assert not untrusted.send(request).ok  # an unknown CA: refused, and not retried
        assert time.monotonic() - started < 60
    finally:
        trusted.shutdown()
        untrusted.shutdown()
