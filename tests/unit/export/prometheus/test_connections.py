"""The endpoint under idle floods, slow clients and bad requests: real sockets, real server.

No latency is asserted (that is the ``prometheus-flood`` benchmark's job): scrapes must succeed
within generous deadlines, idle sockets must eventually be closed, and the thread count must
not grow with the clients.
"""

from __future__ import annotations

import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator

import pytest

from gpu_otel_agent.export.prometheus.probes import HealthCheck
from gpu_otel_agent.export.prometheus.server import MetricsEndpoint
from gpu_otel_agent.http_server.connections import Limits
from gpu_otel_agent.model.snapshot import SnapshotStore
from tests.unit.export.prometheus.snapshots import device, store_with
from tests.unit.export.prometheus.test_endpoint import RESOURCE, config

DEADLINE = 60.0  # generous: a loaded 2-core machine must pass


@pytest.fixture
def start() -> Iterator[Callable[[Limits], MetricsEndpoint]]:
    started: list[MetricsEndpoint] = []

    def make(limits: Limits) -> MetricsEndpoint:
        store: SnapshotStore = store_with(device(0, 0.37, 100, time.time_ns()))
        cfg = config()
        endpoint = MetricsEndpoint(lambda: cfg, store, RESOURCE,
                                   HealthCheck(store, 1, lambda: cfg), limits=limits)
        endpoint.start()
        started.append(endpoint)
        return endpoint

    yield make
    for endpoint in started:
        endpoint.stop()


def _idle(endpoint: MetricsEndpoint, count: int) -> list[socket.socket]:
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(endpoint.address, timeout=DEADLINE)
        sockets.append(sock)
    return sockets


def _scrape(endpoint: MetricsEndpoint) -> bytes:
    host, port = endpoint.address
    with urllib.request.urlopen(f"http://{host}:{port}/metrics", timeout=DEADLINE) as response:
        assert response.status == 200
        body: bytes = response.read()
        return body


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed it (EOF or reset); waits up to DEADLINE."""
    sock.settimeout(DEADLINE)
    try:
        return sock.recv(1024) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def _wait(condition: Callable[[], bool]) -> bool:
    deadline = time.monotonic() + DEADLINE
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return False


def test_a_flood_of_idle_connections_neither_blocks_a_scrape_nor_adds_threads(
    start: Callable[[Limits], MetricsEndpoint],
) -> None:
    endpoint = start(Limits(header_timeout=2.0))
    assert b"hw_gpu_utilization_ratio" in _scrape(endpoint)  # workers exist from here on
    threads = threading.active_count() + endpoint.server.limits.workers  # pool fills lazily
    flood = _idle(endpoint, 300)
    try:
        assert _wait(lambda: endpoint.server.open_connections >= 300)  # all held at once
        assert b"hw_gpu_utilization_ratio" in _scrape(endpoint)
        assert threading.active_count() <= threads  # no thread per connection
        # Nothing was ever sent on them: each is closed once header_timeout has passed.
        assert all(_closed_by_server(sock) for sock in flood)
    finally:
        for sock in flood:
            sock.close()
    assert _wait(lambda: endpoint.server.open_connections == 0)
    assert threading.active_count() <= threads


def test_past_the_connection_limit_the_longest_idle_connection_makes_room(
    start: Callable[[Limits], MetricsEndpoint],
) -> None:
    endpoint = start(Limits(max_connections=20, header_timeout=600.0))
    flood = _idle(endpoint, 40)
    try:
        assert _wait(lambda: endpoint.server.evicted >= 20)
        assert b"hw_gpu_utilization_ratio" in _scrape(endpoint)  # never locked out
        assert endpoint.server.open_connections <= 20
        assert _closed_by_server(flood[0])  # the oldest went first
        assert endpoint.server.refused == 0
    finally:
        for sock in flood:
            sock.close()


def test_a_slow_request_head_is_cut_off_but_a_kept_alive_connection_serves_many(
    start: Callable[[Limits], MetricsEndpoint],
) -> None:
    endpoint = start(Limits(header_timeout=1.0, idle_timeout=600.0))
    slow = socket.create_connection(endpoint.address, timeout=DEADLINE)
    try:
        slow.sendall(b"GET /metrics HTTP/1.1\r\n")  # and never the rest (slowloris)
        assert _closed_by_server(slow)
    finally:
        slow.close()
    alive = socket.create_connection(endpoint.address, timeout=DEADLINE)
    try:
        for _ in range(3):  # past header_timeout in between: idle_timeout applies
            alive.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert _read_response(alive).startswith(b"HTTP/1.1 200 OK\r\n")
            time.sleep(1.5)
    finally:
        alive.close()


def _read_response(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    while len(body) < length:
        body += sock.recv(4096)
    return head + b"\r\n\r\n" + body


@pytest.mark.parametrize(("request_bytes", "status"), [
    (b"POST /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi", b"405"),
    (b"GET /metrics HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", b"400"),
    (b"GET /metrics\r\n\r\n", b"400"),
    (b"GET /metrics HTTP/2.0\r\nHost: x\r\n\r\n", b"505"),
    (b"GET /metrics HTTP/1.1\r\n bad: folding\r\n\r\n", b"400"),
    (b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 40_000 + b"\r\n\r\n",
     b"431"),
    # Refusals h11 makes for us (RFC 9112): no Host in HTTP/1.1, two Content-Lengths that
    # disagree (request smuggling), a space before a header field's colon.
    (b"GET /metrics HTTP/1.1\r\n\r\n", b"400"),
    (b"GET /metrics HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nContent-Length: 5\r\n\r\n",
     b"400"),
    (b"GET /metrics HTTP/1.1\r\nHost : x\r\n\r\n", b"400"),
    # The limit holds for a head that arrives whole as for one that trickles in.
    (b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 17_000 + b"\r\n\r\n",
     b"431"),
])
def test_bad_requests_get_a_clear_status_and_the_connection_closes(
    start: Callable[[Limits], MetricsEndpoint], request_bytes: bytes, status: bytes,
) -> None:
    endpoint = start(Limits())
    sock = socket.create_connection(endpoint.address, timeout=DEADLINE)
    try:
        sock.sendall(request_bytes)
        response = _read_response(sock)
        assert response.startswith(b"HTTP/1.1 " + status + b" ")
        assert b"\r\nConnection: close\r\n" in response
        assert _closed_by_server(sock)
    finally:
        sock.close()
    assert b"hw_gpu_utilization_ratio" in _scrape(endpoint)


def test_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="max_connections must be at least 1"):
        Limits(max_connections=0)
    with pytest.raises(ValueError, match="header_timeout must be positive"):
        Limits(header_timeout=0)
