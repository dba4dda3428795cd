"""The HTTP server's bounds on what a client may hold before it is authorised (issue 39): real
sockets, a real TLS client, the real server. Counts and order are asserted, never latency."""

from __future__ import annotations

import http.client
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.http_server.connections import HttpServer, Limits, Request, Response
from tests.polling import wait_until
from tests.receivers.hostile import client_context, closed_by_server
from tests.unit.export.prometheus.test_endpoint import _self_signed

PARTIAL_HELLO = b"\x16\x03\x01\x02\x00\x01"  # a TLS record header and one byte of a hello


def _ok(request: Request) -> Response:
    return Response(200, b"served\n")


@pytest.fixture
def tls_context(tmp_path: Path) -> ssl.SSLContext:
    _self_signed(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp_path / "cert.pem", tmp_path / "key.pem")
    return context


def _serve(handler: object = _ok, context: ssl.SSLContext | None = None,
           **kwargs: object) -> HttpServer:
    sock = socket.create_server(("127.0.0.1", 0))
    limits = kwargs.pop("limits", Limits())
    server = HttpServer(sock, handler, lambda: context, lambda: {}, limits,  # type: ignore[arg-type]
                        **kwargs)  # type: ignore[arg-type]
    server.start()
    return server


@pytest.fixture
def servers() -> Iterator[list[HttpServer]]:
    started: list[HttpServer] = []
    yield started
    for server in started:
        server.stop()


def test_past_the_handshake_limit_the_oldest_stalled_handshake_is_closed(
    tls_context: ssl.SSLContext, servers: list[HttpServer],
) -> None:
    # A header timeout no test waits for: only the handshake limit can close a connection.
    server = _serve(context=tls_context, limits=Limits(max_handshakes=2, header_timeout=600))
    servers.append(server)
    stalled = []
    for _ in range(3):
        sock = socket.create_connection(server.address, timeout=60)
        sock.sendall(PARTIAL_HELLO)
        stalled.append(sock)
        # In order: each is under way before the next arrives (the third evicts the first).
        wait_until(lambda: server.handshakes + server.evicted_handshakes == len(stalled))
    wait_until(lambda: closed_by_server(stalled[0]), what="the oldest handshake is closed")
    assert server.evicted_handshakes == 1
    assert not closed_by_server(stalled[1]) and not closed_by_server(stalled[2])
    # A real client still gets through (and evicts the next oldest stalled one).
    connection = http.client.HTTPSConnection(*server.address, timeout=60,
                                             context=client_context())
    connection.request("GET", "/")
    assert connection.getresponse().read() == b"served\n"
    connection.close()


def test_a_silent_tls_connection_is_closed_at_the_header_deadline(
    tls_context: ssl.SSLContext, servers: list[HttpServer],
) -> None:
    server = _serve(context=tls_context, limits=Limits(header_timeout=0.5))
    servers.append(server)
    sock = socket.create_connection(server.address, timeout=60)
    wait_until(lambda: closed_by_server(sock), what="closed after the header deadline")
    assert server.evicted_handshakes == 0


def test_past_the_check_limit_an_unverified_request_is_answered_429_at_once(
    servers: list[HttpServer],
) -> None:
    release = threading.Event()
    checking = threading.Event()

    def check(request: Request) -> Response | None:
        checking.set()
        release.wait(60)  # a slow password check, held until the test lets it go
        return None

    def triage(request: Request) -> Response | bool:
        if request.path == "/healthz":
            return Response(200, b"ok\n")
        return request.header("authorization") == "known"

    server = _serve(triage=triage, check=check, limits=Limits(max_checks=1))
    servers.append(server)
    host, port = server.address
    first = http.client.HTTPConnection(host, port, timeout=60)
    first.request("GET", "/metrics", headers={"Authorization": "new"})
    wait_until(checking.is_set)
    try:
        # The checker is busy: the probe, a known credential and a second new one are all
        # answered while the first check still runs.
        for headers, status in (({}, 200), ({"Authorization": "known"}, 200),
                                ({"Authorization": "other"}, 429)):
            path = "/healthz" if not headers else "/metrics"
            other = http.client.HTTPConnection(host, port, timeout=60)
            other.request("GET", path, headers=headers)
            answer = other.getresponse()
            answer.read()
            assert answer.status == status
            if status == 429:
                assert answer.getheader("Retry-After") == "1"
            other.close()
        assert not release.is_set()
    finally:
        release.set()
    answer = first.getresponse()
    assert answer.status == 200 and answer.read() == b"served\n"
    first.close()
    assert server.throttled == 1
