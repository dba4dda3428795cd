"""The headers built once per call (``grpc.request_headers``) against h2's own sending path.

The reference is what the client sent before: the headers as ``str`` pairs through h2's
outbound normalisation and validation. Both header blocks are decoded by hpack, so the
comparison is of what a server reads: the same names and values in the same order, and the
same fields kept out of the compression context (never-indexed). Metadata that is not plain
must still go through h2's checks, and fail or pass there as before.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import RequestReceived
from h2.exceptions import ProtocolError
from hpack import NeverIndexedHeaderTuple

from gpu_otel_agent.grpc.request_headers import RequestHeaders, request_headers

PATH = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
Pairs = tuple[tuple[str, str | bytes], ...]


def _reference(metadata: Pairs, timeout: str, gzip: bool) -> list[tuple[str, str]]:
    """The list the client built before, left to h2 to normalise and validate."""
    headers = [(":method", "POST"), (":scheme", "http"), (":path", PATH),
               (":authority", "collector:4317"), ("te", "trailers"),
               ("content-type", "application/grpc"), ("user-agent", "agent/1.0"),
               ("grpc-timeout", timeout), ("grpc-accept-encoding", "identity,gzip")]
    if gzip:
        headers.append(("grpc-encoding", "gzip"))
    for key, value in metadata:
        text = (base64.b64encode(value).rstrip(b"=").decode("ascii")
                if isinstance(value, bytes) else value)
        headers.append((key.lower(), text))
    return headers


def _built(metadata: Pairs, gzip: bool) -> RequestHeaders:
    return request_headers(PATH, scheme="http", authority="collector:4317",
                           user_agent="agent/1.0", gzip=gzip, metadata=metadata)


def _client(checked: bool) -> H2Connection:
    client = H2Connection(H2Configuration(
        client_side=True, header_encoding=None, validate_outbound_headers=checked,
        normalize_outbound_headers=checked))
    client.initiate_connection()
    return client


def _received(client: H2Connection, calls: int) -> list[list[Any]]:
    """What a server decodes from ``client``'s output (the headers of each request)."""
    server = H2Connection(H2Configuration(client_side=False, header_encoding=None))
    server.initiate_connection()
    events = server.receive_data(client.data_to_send())
    found = [list(event.headers or ()) for event in events
             if isinstance(event, RequestReceived)]
    assert len(found) == calls
    return found


def _kinds(headers: list[Any]) -> list[tuple[bytes, bytes, bool]]:
    return [(bytes(header[0]), bytes(header[1]), isinstance(header, NeverIndexedHeaderTuple))
            for header in headers]


PLAIN: list[Pairs] = [
    (),
    (("x-tenant", "acme"),),
    (("Authorization", "Bearer t0k3n"), ("X-Scope-OrgID", "team-a")),
    (("trace-bin", b"\x00\xffbinary"), ("proxy-authorization", "Basic dTpw")),
    (("api-key", ""), ("x.y_z", "a b c")),
]


@pytest.mark.parametrize("metadata", PLAIN)
@pytest.mark.parametrize("gzip", [False, True])
def test_plain_headers_read_as_h2_normalised_them(metadata: Pairs, gzip: bool) -> None:
    built = _built(metadata, gzip)
    assert built.plain
    fast, reference = _client(checked=False), _client(checked=True)
    # Several calls, the timeout changing: the HPACK tables evolve differently (never-indexed
    # timeouts), and what the server reads must stay the same.
    timeouts = ["9999000u", "9998877u", "4S", "9999000u"]
    for number, timeout in enumerate(timeouts):
        fast.send_headers(1 + 2 * number, built.with_timeout(timeout), end_stream=True)
        reference.send_headers(1 + 2 * number, _reference(metadata, timeout, gzip),
                               end_stream=True)
    for got, want in zip(_received(fast, len(timeouts)), _received(reference, len(timeouts)),
                         strict=True):
        assert [h[:2] for h in _kinds(got)] == [h[:2] for h in _kinds(want)]
        # Credentials stay out of the compression context, as h2's normalisation keeps them.
        secret = {name for name, _, hidden in _kinds(want) if hidden}
        assert secret <= {name for name, _, hidden in _kinds(got) if hidden}


NOT_PLAIN: list[Pairs] = [
    (("x-padded", " value "),),  # h2 strips it
    (("connection", "close"),),  # h2 drops it
    (("te", "gzip"),),  # h2 refuses it
    (("cookie", "a=b"),),  # h2 hides short ones from compression
    (("x-name", "caf\u00e9"),),  # not printable ASCII
    ((":path", "/other"),),  # a pseudo-header among metadata: h2 refuses it
    (("bad name", "v"),),
]


def _outcome(client: H2Connection, headers: list[Any]) -> object:
    """Where a request with ``headers`` ends: refused by h2 as it is sent, refused by the
    server reading it, or the headers the server reads."""
    try:
        client.send_headers(1, headers, end_stream=True)
    except ProtocolError:
        return "refused when sent"
    try:
        (got,) = _received(client, 1)
    except ProtocolError:
        return "refused by the server"
    return [h[:2] for h in _kinds(got)]


@pytest.mark.parametrize("metadata", NOT_PLAIN)
def test_other_metadata_goes_through_h2s_checks_as_before(metadata: Pairs) -> None:
    built = _built(metadata, False)
    assert not built.plain
    assert (_outcome(_client(checked=True), built.with_timeout("1S"))
            == _outcome(_client(checked=True), _reference(metadata, "1S", False)))


def test_the_timeout_is_kept_out_of_the_hpack_table() -> None:
    client = _client(checked=False)
    built = _built((("x-tenant", "acme"),), False)
    for number in range(200):
        client.send_headers(1 + 2 * number, built.with_timeout(f"{9_999_000 - number}u"),
                            end_stream=True)
    entries = client.encoder.header_table.dynamic_entries
    assert all(name != b"grpc-timeout" for name, _ in entries)
    assert (b":authority", b"collector:4317") in entries  # not evicted by the timeouts
