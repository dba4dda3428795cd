"""The agent's own gRPC client (``grpc.unary_client``) against real grpcio servers, the reference.

Requests must arrive byte for byte (1 MiB: past every HTTP/2 window), headers as metadata,
gzip as gRPC frames it (sniffed on the wire); every status a servicer can end with must come
back as the same code with its message and trailers; a restarted server, one that never
answers, a closed port and TLS must end as gRPC clients end them. Margins are generous: a
loaded 2-core machine is slow to schedule.
"""

from __future__ import annotations

import contextlib
import hashlib
import socket
import ssl
import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from google.rpc.error_details_pb2 import RetryInfo
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2

from gpu_otel_agent.export.otlp.senders import export_method
from gpu_otel_agent.grpc.connection import tls_context
from gpu_otel_agent.grpc.status import GrpcError, StatusCode
from gpu_otel_agent.grpc.unary_client import GrpcClient
from gpu_otel_agent.version import USER_AGENT
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.unit.export.otlp.test_otlp_transport import _silent_server

MARGIN_S = 10.0
SERVICE, METHOD = "test.Wire", "Call"
PATH = f"/{SERVICE}/{METHOD}"
MIB = 1024 * 1024


@dataclass
class _Servicer:
    """A raw-bytes method: records what arrived, then echoes it, stalls, or aborts."""

    requests: list[bytes] = field(default_factory=list)
    metadata: list[dict[str, Any]] = field(default_factory=list)
    remaining: list[float] = field(default_factory=list)
    abort: tuple[grpc.StatusCode, str] | None = None
    trailers: tuple[tuple[str, Any], ...] = ()
    stall: threading.Event | None = None

    def __call__(self, request: bytes, context: Any) -> bytes:
        self.requests.append(request)
        self.metadata.append(dict(context.invocation_metadata()))
        self.remaining.append(float(context.time_remaining()))
        if self.stall is not None:
            self.stall.wait(60)
        context.set_trailing_metadata(self.trailers)
        if self.abort is not None:
            context.abort(*self.abort)
        return request[::-1]  # an answer as large as the request, and not the same bytes


def _serve(servicer: _Servicer, port: int = 0,
           credentials: grpc.ServerCredentials | None = None) -> tuple[grpc.Server, int]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        SERVICE, {METHOD: grpc.unary_unary_rpc_method_handler(servicer)}),))
    address = f"127.0.0.1:{port}"
    bound = (server.add_insecure_port(address) if credentials is None
             else server.add_secure_port(address, credentials))
    server.start()
    return server, int(bound)


@pytest.fixture
def served() -> Iterator[tuple[_Servicer, GrpcClient]]:
    servicer = _Servicer()
    server, port = _serve(servicer)
    client = GrpcClient.tcp(f"127.0.0.1:{port}")
    try:
        yield servicer, client
    finally:
        if servicer.stall is not None:
            servicer.stall.set()
        client.close()
        server.stop(None).wait(5)


def _payload(size: int) -> bytes:
    """Incompressible-ish bytes that differ everywhere, so a shifted frame would show."""
    out = bytearray()
    counter = 0
    while len(out) < size:
        out += hashlib.sha256(counter.to_bytes(8, "big")).digest()
        counter += 1
    return bytes(out[:size])


def test_a_mebibyte_arrives_byte_identical_and_its_answer_comes_back(
    served: tuple[_Servicer, GrpcClient],
) -> None:
    servicer, client = served
    request = _payload(MIB + 12345)  # past the 64 KiB initial windows: flow control
    answer = client.unary(PATH, request, 30)
    assert servicer.requests == [request]
    assert answer == request[::-1]
    # The same connection serves the next call.
    assert client.unary(PATH, b"again", 30) == b"niaga"


def test_headers_arrive_as_metadata_with_the_deadline(
    served: tuple[_Servicer, GrpcClient],
) -> None:
    servicer, client = served
    client.unary(PATH, b"x", 7.0, [("X-Tenant", "acme"), ("authorization", "Bearer t"),
                                   ("trace-bin", b"\x00\xffbinary")])
    (metadata,) = servicer.metadata
    assert metadata["x-tenant"] == "acme"
    assert metadata["authorization"] == "Bearer t"
    assert metadata["trace-bin"] == b"\x00\xffbinary"  # base64 on the wire, bytes again
    assert str(metadata["user-agent"]).startswith(USER_AGENT)
    (remaining,) = servicer.remaining  # grpc-timeout, less the time in transit
    assert 7.0 / 2 < remaining <= 7.0 * 1.05


def test_gzip_is_framed_as_grpc_compresses(tmp_path: Path) -> None:
    request = metrics_service_pb2.ExportMetricsServiceRequest()
    request.resource_metrics.add().schema_url = "s" * MIB  # compresses well; still large
    with OtlpGrpcReceiver() as receiver:
        client = GrpcClient.tcp(receiver.address, gzip=True)
        try:
            client.unary(export_method("METRICS"), request.SerializeToString(), 30)
        finally:
            client.close()
        (received,) = receiver.store.received()
    assert received.request == request
    assert received.compression == "gzip"  # compressed flag and gzip magic, on the wire


# --- statuses ---------------------------------------------------------------------------

NON_OK = [code for code in grpc.StatusCode if code is not grpc.StatusCode.OK]


@pytest.mark.parametrize("code", NON_OK, ids=[c.name for c in NON_OK])
def test_each_status_of_a_servicer_comes_back_with_its_message_and_trailers(
    served: tuple[_Servicer, GrpcClient], code: grpc.StatusCode,
) -> None:
    servicer, client = served
    delay = RetryInfo(retry_delay=Duration(seconds=3, nanos=500_000_000))
    servicer.trailers = (("google.rpc.retryinfo-bin", delay.SerializeToString()),
                         ("x-why", "busy"))
    servicer.abort = (code, "naïve 100% sure: no\nway")  # percent-encoded on the wire
    with pytest.raises(GrpcError) as raised:
        client.unary(PATH, b"x", 10)
    error = raised.value
    assert (error.code.name, int(error.code)) == (code.name, code.value[0])
    assert error.details == "naïve 100% sure: no\nway"
    trailers = dict(error.trailing_metadata)
    assert RetryInfo.FromString(trailers["google.rpc.retryinfo-bin"]) == delay
    assert trailers["x-why"] == "busy"
    servicer.abort = None
    assert client.unary(PATH, b"ok", 10) == b"ko"  # the connection serves the next call


def test_an_unknown_method_is_unimplemented(served: tuple[_Servicer, GrpcClient]) -> None:
    _, client = served
    with pytest.raises(GrpcError) as raised:
        client.unary("/no.Such/Method", _payload(300_000), 10)  # answered before it is read
    assert raised.value.code is StatusCode.UNIMPLEMENTED
    assert client.unary(PATH, b"ok", 10) == b"ko"


def test_the_enum_is_grpcs() -> None:
    assert {(c.name, int(c)) for c in StatusCode} == {
        (c.name, c.value[0]) for c in grpc.StatusCode}


# --- connections ------------------------------------------------------------------------


def test_a_restarted_collector_is_reached_on_the_next_call() -> None:
    with OtlpGrpcReceiver() as receiver:
        client = GrpcClient.tcp(receiver.address)
        path = export_method("METRICS")
        try:
            client.unary(path, b"", 10)
            receiver.restart()  # every connection cut, the same port served again
            client.unary(path, b"", 10)
        finally:
            client.close()
        assert len(receiver.store.received()) == 2


def test_a_server_that_said_goaway_while_idle_is_reconnected() -> None:
    first = _Servicer()
    server, port = _serve(first)
    client = GrpcClient.tcp(f"127.0.0.1:{port}")
    second = _Servicer()
    try:
        assert client.unary(PATH, b"ab", 10) == b"ba"
        server.stop(None).wait(5)  # GOAWAY, then the socket closes
        server, _ = _serve(second, port)
        assert client.unary(PATH, b"cd", 10) == b"dc"
    finally:
        client.close()
        server.stop(None).wait(5)
    assert (first.requests, second.requests) == ([b"ab"], [b"cd"])


def test_a_server_that_never_answers_ends_the_call_at_its_deadline() -> None:
    listener, endpoint = _silent_server()  # accepts and reads; no HTTP/2 settings, no status
    client = GrpcClient.tcp(endpoint.removeprefix("http://"))
    started = time.monotonic()
    try:
        with pytest.raises(GrpcError) as raised:
            client.unary(PATH, _payload(200_000), 1.5)  # more than the window it never grows
    finally:
        client.close()
        listener.close()
    elapsed = time.monotonic() - started
    assert raised.value.code is StatusCode.DEADLINE_EXCEEDED
    assert isinstance(raised.value.__cause__, TimeoutError)
    assert 1.5 * 0.9 <= elapsed < 1.5 + MARGIN_S


def test_a_stalled_servicer_ends_the_call_at_its_deadline_and_the_next_call_works(
    served: tuple[_Servicer, GrpcClient],
) -> None:
    servicer, client = served
    servicer.stall = threading.Event()
    started = time.monotonic()
    with pytest.raises(GrpcError) as raised:
        client.unary(PATH, b"x", 1.0)
    assert raised.value.code is StatusCode.DEADLINE_EXCEEDED
    assert time.monotonic() - started < 1.0 + MARGIN_S
    servicer.stall.set()
    servicer.stall = None
    assert client.unary(PATH, b"yz", 10) == b"zy"


def test_close_from_another_thread_ends_a_call_in_progress(
    served: tuple[_Servicer, GrpcClient],
) -> None:
    servicer, client = served
    servicer.stall = threading.Event()
    errors: list[GrpcError] = []

    def call() -> None:
        try:
            client.unary(PATH, b"x", 60)
        except GrpcError as error:
            errors.append(error)

    worker = threading.Thread(target=call)
    worker.start()
    deadline = time.monotonic() + MARGIN_S
    while not servicer.requests and time.monotonic() < deadline:
        time.sleep(0.01)
    client.close()
    worker.join(MARGIN_S)  # far less than the call's 60 s
    assert not worker.is_alive()
    assert [e.code for e in errors] == [StatusCode.UNAVAILABLE]


def test_a_refused_connection_is_unavailable_with_the_os_error_as_cause() -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]  # closed again below: nothing listens there
    client = GrpcClient.tcp(f"127.0.0.1:{port}")
    with pytest.raises(GrpcError) as raised:
        client.unary(PATH, b"x", 5)
    assert raised.value.code is StatusCode.UNAVAILABLE
    assert isinstance(raised.value.__cause__, ConnectionRefusedError)


def test_an_unresolvable_host_is_unavailable_with_the_resolver_error_as_cause() -> None:
    client = GrpcClient.tcp("no-such-host.invalid:4317")
    with pytest.raises(GrpcError) as raised:
        client.unary(PATH, b"x", 10)
    assert raised.value.code is StatusCode.UNAVAILABLE
    assert isinstance(raised.value.__cause__, socket.gaierror)


# --- TLS --------------------------------------------------------------------------------


def _self_signed(directory: Path, name: str) -> tuple[Path, Path]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
         "-keyout", str(key), "-out", str(cert)], check=True, capture_output=True)
    return cert, key


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    directory = tmp_path_factory.mktemp("pki")
    return {name: _self_signed(directory, name) for name in ("server", "other", "client")}


def _tls_server(pki: dict[str, tuple[Path, Path]], servicer: _Servicer, *,
                client_auth: bool = False) -> tuple[grpc.Server, int]:
    cert, key = pki["server"]
    credentials = grpc.ssl_server_credentials(
        [(key.read_bytes(), cert.read_bytes())],
        root_certificates=pki["client"][0].read_bytes() if client_auth else None,
        require_client_auth=client_auth)
    return _serve(servicer, credentials=credentials)


def test_tls_with_the_collectors_ca_and_a_client_certificate(
    pki: dict[str, tuple[Path, Path]],
) -> None:
    servicer = _Servicer()
    server, port = _tls_server(pki, servicer, client_auth=True)
    client_cert, client_key = pki["client"]
    context = tls_context(str(pki["server"][0]), str(client_cert), str(client_key))
    for authority in (f"127.0.0.1:{port}", f"localhost:{port}"):  # an IP and a name, checked
        client = GrpcClient.tcp(authority, context)
        try:
            assert client.unary(PATH, _payload(300_000), 10) == _payload(300_000)[::-1]
        finally:
            client.close()
    server.stop(None).wait(5)
    assert len(servicer.requests) == 2


@pytest.mark.parametrize("wrong", ["another CA", "the system's CAs"])
def test_tls_with_a_wrong_ca_fails_certificate_verification(
    pki: dict[str, tuple[Path, Path]], wrong: str,
) -> None:
    servicer = _Servicer()
    server, port = _tls_server(pki, servicer)
    cafile = str(pki["other"][0]) if wrong == "another CA" else None
    client = GrpcClient.tcp(f"127.0.0.1:{port}", tls_context(cafile))
    try:
        with pytest.raises(GrpcError) as raised:
            client.unary(PATH, b"x", 10)
    finally:
        client.close()
        server.stop(None).wait(5)
    assert raised.value.code is StatusCode.UNAVAILABLE
    cause = raised.value.__cause__
    assert isinstance(cause, ssl.SSLCertVerificationError), repr(cause)
    assert servicer.requests == []


# --- answers no grpcio server gives: a proxy's HTTP status, a reset, a GOAWAY -------------


def _h2_server(answer: Any) -> tuple[socket.socket, str]:
    """A bare HTTP/2 server (h2's server side): once a request's headers arrive,
    ``answer(connection, stream_id)`` writes the reply; the socket carries it out."""
    from h2.events import RequestReceived

    def handle(connection: Any, event: Any, sock: socket.socket) -> None:
        if isinstance(event, RequestReceived):
            answer(connection, event.stream_id)

    return _h2_events_server(handle)


def _failed_call(answer: Any) -> GrpcError:
    """The error one call to an ``_h2_server`` answering with ``answer`` ends with."""
    listener, address = _h2_server(answer)
    client = GrpcClient.tcp(address)
    try:
        with pytest.raises(GrpcError) as raised:
            client.unary(PATH, b"x", 10)
    finally:
        client.close()
        listener.close()
    return raised.value


@pytest.mark.parametrize(("status", "code"), [
    (400, StatusCode.INTERNAL), (401, StatusCode.UNAUTHENTICATED),
    (403, StatusCode.PERMISSION_DENIED), (404, StatusCode.UNIMPLEMENTED),
    (429, StatusCode.UNAVAILABLE), (502, StatusCode.UNAVAILABLE),
    (503, StatusCode.UNAVAILABLE), (504, StatusCode.UNAVAILABLE), (500, StatusCode.UNKNOWN),
])
def test_an_http_status_from_a_proxy_maps_as_grpc_maps_it(status: int,
                                                          code: StatusCode) -> None:
    error = _failed_call(lambda connection, stream: connection.send_headers(
        stream, [(":status", str(status)), ("content-type", "text/plain")], end_stream=True))
    assert error.code is code
    assert f"HTTP status {status}" in error.details


@pytest.mark.parametrize(("reset", "code"), [
    ("REFUSED_STREAM", StatusCode.UNAVAILABLE), ("CANCEL", StatusCode.CANCELLED),
    ("ENHANCE_YOUR_CALM", StatusCode.RESOURCE_EXHAUSTED), ("INTERNAL_ERROR", StatusCode.INTERNAL),
])
def test_a_reset_stream_maps_to_its_code(reset: str, code: StatusCode) -> None:
    from h2.errors import ErrorCodes

    error = _failed_call(
        lambda connection, stream: connection.reset_stream(stream, ErrorCodes[reset]))
    assert error.code is code


def test_a_goaway_during_a_call_is_unavailable() -> None:
    error = _failed_call(
        lambda connection, stream: connection.close_connection(last_stream_id=0))
    assert error.code is StatusCode.UNAVAILABLE
    assert "GOAWAY" in error.details


# --- corners the libraries get right (issue 30) -------------------------------------------


def _h2_events_server(handle: Any) -> tuple[socket.socket, str]:
    """A bare HTTP/2 server calling ``handle(connection, event, sock)`` for every event;
    ``handle`` returning False stops serving that connection (it then reads nothing more)."""
    from h2.config import H2Configuration
    from h2.connection import H2Connection
    from h2.events import DataReceived
    from h2.exceptions import H2Error

    listener = socket.create_server(("127.0.0.1", 0))

    def serve(sock: socket.socket) -> None:
        connection = H2Connection(H2Configuration(client_side=False))
        connection.initiate_connection()
        # The client may close or reset first (it has its answer): not the server's failure.
        with sock, contextlib.suppress(OSError, H2Error):
            sock.sendall(connection.data_to_send())
            while data := sock.recv(65536):
                for event in connection.receive_data(data):
                    if isinstance(event, DataReceived):  # the client may send on
                        connection.acknowledge_received_data(event.flow_controlled_length,
                                                             event.stream_id)
                    if handle(connection, event, sock) is False:
                        time.sleep(60)  # a peer that went silent (not even a PING ACK)
                        return
                sock.sendall(connection.data_to_send())

    def accept() -> None:
        while True:
            try:
                sock = listener.accept()[0]
            except OSError:
                return
            threading.Thread(target=serve, args=(sock,), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    return listener, f"127.0.0.1:{listener.getsockname()[1]}"


def _ok_answer(connection: Any, stream: int) -> None:
    connection.send_headers(stream, [(":status", "200"), ("content-type", "application/grpc")])
    connection.send_data(stream, b"\x00\x00\x00\x00\x02ok")
    connection.send_headers(stream, [("grpc-status", "0")], end_stream=True)


def test_an_early_answer_and_its_reset_in_one_read_keep_the_real_status() -> None:
    """The server refuses at the headers (INVALID_ARGUMENT, trailers-only) and resets the
    stream in the same write, while the client is still sending 300 kB: the call ends with
    the server's status, not UNAVAILABLE (which a caller would retry as transient)."""
    from h2.errors import ErrorCodes
    from h2.events import RequestReceived

    def refuse(connection: Any, event: Any, sock: socket.socket) -> None:
        if isinstance(event, RequestReceived):
            connection.send_headers(event.stream_id, [
                (":status", "200"), ("content-type", "application/grpc"),
                ("grpc-status", "3"), ("grpc-message", "bad record")], end_stream=True)
            connection.reset_stream(event.stream_id, ErrorCodes.NO_ERROR)

    listener, address = _h2_events_server(refuse)
    try:
        for _ in range(5):  # a fresh connection each time: the race is the first read
            client = GrpcClient.tcp(address)
            try:
                with pytest.raises(GrpcError) as raised:
                    client.unary(PATH, _payload(300_000), 10)
            finally:
                client.close()
            assert raised.value.code is StatusCode.INVALID_ARGUMENT, raised.value
            assert raised.value.details == "bad record"
    finally:
        listener.close()


def test_an_unknown_method_is_unimplemented_on_every_fresh_connection() -> None:
    """grpcio answers an unknown method at once and resets the stream: on a fresh connection
    both usually arrive in one read (the old client got UNAVAILABLE in 246 of 300)."""
    servicer = _Servicer()
    server, port = _serve(servicer)
    try:
        for _ in range(20):
            client = GrpcClient.tcp(f"127.0.0.1:{port}")
            try:
                with pytest.raises(GrpcError) as raised:
                    client.unary("/no.Such/Method", _payload(300_000), 10)
            finally:
                client.close()
            assert raised.value.code is StatusCode.UNIMPLEMENTED
    finally:
        server.stop(None).wait(5)


def test_a_graceful_goaway_lets_the_call_in_flight_finish_on_a_bare_server() -> None:
    from h2.connection import ConnectionState
    from h2.events import StreamEnded

    def drain(connection: Any, event: Any, sock: socket.socket) -> None:
        if isinstance(event, StreamEnded):
            # "No new streams; the ones up to this one will be answered" (RFC 9113 6.8).
            connection.close_connection(last_stream_id=event.stream_id)
            connection.state_machine.state = ConnectionState.SERVER_OPEN  # h2: answer still
            _ok_answer(connection, event.stream_id)

    listener, address = _h2_events_server(drain)
    client = GrpcClient.tcp(address)
    try:
        assert client.unary(PATH, b"x", 10) == b"ok"
        assert client.unary(PATH, b"y", 10) == b"ok"  # on a new connection
    finally:
        client.close()
        listener.close()


def test_a_grpcio_server_stopping_gracefully_finishes_the_call_in_flight() -> None:
    servicer = _Servicer(stall=threading.Event())
    server, port = _serve(servicer)
    client = GrpcClient.tcp(f"127.0.0.1:{port}")
    outcome: list[object] = []

    def call() -> None:
        try:
            outcome.append(client.unary(PATH, b"in flight", 30))
        except GrpcError as error:
            outcome.append(error)

    caller = threading.Thread(target=call)
    caller.start()
    try:
        deadline = time.monotonic() + 20
        while not servicer.requests:
            assert time.monotonic() < deadline
            time.sleep(0.01)
        stopped = server.stop(grace=20)  # GOAWAY, then waits for the call in flight
        time.sleep(0.2)
        assert servicer.stall is not None
        servicer.stall.set()
        stopped.wait(20)
        caller.join(30)
    finally:
        client.close()
    assert outcome == [b"thgilf ni"]


def test_a_long_idle_connection_is_checked_with_a_ping_before_the_next_call() -> None:
    from h2.events import PingReceived, StreamEnded

    pings: list[bytes] = []

    def answer(connection: Any, event: Any, sock: socket.socket) -> None:
        if isinstance(event, PingReceived):
            pings.append(event.ping_data)
        if isinstance(event, StreamEnded):
            _ok_answer(connection, event.stream_id)

    listener, address = _h2_events_server(answer)
    client = GrpcClient.tcp(address)
    client = GrpcClient(client._open, address, tls=False, ping_after_idle_s=0.2)
    try:
        assert client.unary(PATH, b"x", 10) == b"ok"
        assert pings == [] and client.pings == 0  # busy connections are not pinged
        time.sleep(0.3)
        assert client.unary(PATH, b"x", 10) == b"ok"
        assert client.pings == 1 and len(pings) == 1
    finally:
        client.close()
        listener.close()


def test_a_silent_connection_found_by_the_ping_is_replaced_not_waited_on() -> None:
    """A peer that stopped answering (a NAT dropped the flow): the PING gets no answer, and
    the call goes out on a new connection instead of waiting for its whole deadline."""
    from h2.events import PingReceived, StreamEnded

    def answer(connection: Any, event: Any, sock: socket.socket) -> bool:
        if isinstance(event, PingReceived):
            return False  # silent from now on
        if isinstance(event, StreamEnded):
            _ok_answer(connection, event.stream_id)
        return True

    listener, address = _h2_events_server(answer)
    client = GrpcClient.tcp(address)
    client = GrpcClient(client._open, address, tls=False, ping_after_idle_s=0.2)
    try:
        assert client.unary(PATH, b"x", 10) == b"ok"
        time.sleep(0.3)
        assert client.unary(PATH, b"x", 30) == b"ok"
    finally:
        client.close()
        listener.close()


def test_a_request_is_sent_from_its_own_buffer() -> None:
    """No payload-sized copy on the way out (the prefix was joined to the message, and h2
    copied a frame as large as the server allowed three times): the memory allocated during
    a 2 MiB call stays a fraction of the request."""
    import tracemalloc

    from h2.events import StreamEnded

    def answer(connection: Any, event: Any, sock: socket.socket) -> None:
        if isinstance(event, StreamEnded):
            _ok_answer(connection, event.stream_id)

    listener, address = _h2_events_server(answer)
    client = GrpcClient.tcp(address)
    request = _payload(2 * MIB)
    try:
        assert client.unary(PATH, b"warm", 10) == b"ok"
        tracemalloc.start()
        try:
            assert client.unary(PATH, request, 30) == b"ok"
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    finally:
        client.close()
        listener.close()
    assert peak < len(request) // 4, f"{peak} bytes allocated for a {len(request)}-byte call"
