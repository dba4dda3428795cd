"""HPACK blocks written once and answers kept (``grpc.header_blocks``) against hpack and h2.

The contract with h2's private state (its ``encoder`` and ``decoder`` attributes, replaced
by the client's ``Connection``): a server's h2 reads from the precoded blocks what it reads
from h2's own encoding of the same headers, call after call and across a table-size change
the server asks for; and the kept decoder reads every block as hpack's decoder does, over
random blocks with indexing, sensitive fields and size changes, while taking repeated
blocks that change no table from what it kept. A grpcio server reads the metadata.
"""

from __future__ import annotations

import logging
import random
import socket
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import RequestReceived
from h2.settings import SettingCodes
from hpack import Decoder, Encoder, HeaderTuple, NeverIndexedHeaderTuple

from gpu_otel_agent.grpc.connection import Connection
from gpu_otel_agent.grpc.header_blocks import (
    BlockEncoder,
    KeptDecoder,
    keeps_tables,
    stateless_block,
)
from gpu_otel_agent.grpc.request_headers import RequestHeaders, request_headers
from gpu_otel_agent.grpc.unary_client import GrpcClient
from gpu_otel_agent.version import USER_AGENT

PATH = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export"
METADATA: list[tuple[tuple[str, str | bytes], ...]] = [
    (),
    (("authorization", "Bearer t0k3n"), ("x-scope-orgid", "team-a")),
    (("trace-bin", b"\x00\xffbinary"), ("proxy-authorization", "Basic dTpw"), ("e", "")),
]


@pytest.fixture
def connection() -> Iterator[Connection]:
    """The client's own Connection (its h2 with the replaced HPACK objects), unconnected
    to anything that reads: only its h2 state is driven here."""
    ours, theirs = socket.socketpair()
    with theirs:
        built = Connection(ours)
        yield built
        built.close()


def _built(metadata: tuple[tuple[str, str | bytes], ...]) -> RequestHeaders:
    built = request_headers(PATH, scheme="http", authority="collector:4317",
                            user_agent="agent/1.0", gzip=False, metadata=metadata)
    assert built.plain
    return built


def _server() -> H2Connection:
    server = H2Connection(H2Configuration(client_side=False, header_encoding=None))
    server.initiate_connection()
    return server


def _kinds(headers: Any) -> list[tuple[bytes, bytes, bool]]:
    return [(bytes(h[0]), bytes(h[1]), isinstance(h, NeverIndexedHeaderTuple))
            for h in headers]


def _requests(server: H2Connection, data: bytes) -> list[list[tuple[bytes, bytes, bool]]]:
    return [_kinds(event.headers) for event in server.receive_data(data)
            if isinstance(event, RequestReceived)]


def test_the_connection_gives_h2_its_hpack_objects_with_h2s_limits(
        connection: Connection) -> None:
    reference = H2Connection(H2Configuration(client_side=True))
    assert connection.h2.encoder is connection.encoder
    assert isinstance(connection.h2.decoder, KeptDecoder)
    assert (connection.h2.decoder.max_header_list_size
            == reference.decoder.max_header_list_size)
    assert (connection.h2.decoder.max_allowed_table_size
            == reference.decoder.max_allowed_table_size)


@pytest.mark.parametrize("metadata", METADATA)
def test_a_server_reads_precoded_requests_as_h2s_own_across_a_table_size_change(
        connection: Connection, metadata: tuple[tuple[str, str | bytes], ...]) -> None:
    built = _built(metadata)
    client = connection.h2
    reference = H2Connection(H2Configuration(client_side=True, header_encoding=None))
    reference.initiate_connection()
    server, reference_server = _server(), _server()
    for peer, its_server in ((client, server), (reference, reference_server)):
        its_server.receive_data(peer.data_to_send())
        peer.receive_data(its_server.data_to_send())
        its_server.receive_data(peer.data_to_send())
    rng = random.Random(len(metadata))
    for call in range(12):
        if call in (4, 8):
            # The server shrinks its HPACK table (0, then 256 bytes): its decoder refuses a
            # block that does not announce the new size first (InvalidTableSizeError).
            size = 0 if call == 4 else 256
            for peer, its_server in ((client, server), (reference, reference_server)):
                its_server.update_settings({SettingCodes.HEADER_TABLE_SIZE: size})
                peer.receive_data(its_server.data_to_send())
        timeout = f"{rng.randrange(1, 10**8)}{rng.choice('umS')}"
        listed = built.with_timeout(timeout)
        connection.encoder.precoded(listed, built.block(timeout))
        client.send_headers(1 + 2 * call, listed, end_stream=True)
        reference.send_headers(1 + 2 * call, built.with_timeout(timeout), end_stream=True)
        got = _requests(server, client.data_to_send())
        want = _requests(reference_server, reference.data_to_send())
        assert got == want
        assert (b"grpc-timeout", timeout.encode(), True) in got[0]


def test_a_list_other_than_the_one_announced_is_hpacks() -> None:
    encoder, reference = BlockEncoder(), Encoder()
    built = _built(())
    encoder.precoded(built.with_timeout("1S"), built.block("1S"))
    other = [(b":method", b"GET"), (b"x", b"y")]
    assert encoder.encode(other) == reference.encode(other)
    # The announcement held for one call only.
    assert encoder.encode(built.with_timeout("1S")) == reference.encode(built.with_timeout("1S"))


def test_a_stateless_block_reads_the_same_whatever_the_table_holds() -> None:
    headers = list(_built(METADATA[1]).with_timeout("5S"))
    block = stateless_block(headers)
    fresh, filled = Decoder(), Decoder()
    encoder = Encoder()
    filled.decode(encoder.encode([(b"x-filler", b"1"), (b":path", b"/x"),
                                  (b"authorization", b"other")]))
    before = list(filled.header_table.dynamic_entries)
    assert _kinds(fresh.decode(block, raw=True)) == _kinds(filled.decode(block, raw=True))
    assert _kinds(fresh.decode(block, raw=True)) == _kinds(headers)
    assert list(filled.header_table.dynamic_entries) == before  # nothing indexed
    assert not fresh.header_table.dynamic_entries


_POOL = [(b":status", b"200"), (b"content-type", b"application/grpc"),
         (b"grpc-status", b"0"), (b"grpc-message", b""), (b"grpc-message", b"x y"),
         (b"grpc-accept-encoding", b"identity, deflate, gzip"), (b"x-" + b"a" * 150, b"v"),
         (b"grpc-status", b"14"), (b"retry", b"b" * 200)]


def _random_blocks(seed: int, count: int) -> Iterator[tuple[bytes, int | None]]:
    """Blocks a server's hpack encoder writes: fields indexed or not, sensitive ones, a
    table-size change now and then (the size, for the decoder's limit)."""
    rng = random.Random(seed)
    encoder = Encoder()
    lists = [[rng.choice(_POOL) for _ in range(rng.randrange(1, 4))] for _ in range(6)]
    for _ in range(count):
        size = None
        if rng.random() < 0.05:
            size = rng.choice([size for size in (0, 64, 256, 4096)
                               if size != encoder.header_table_size])
            encoder.header_table_size = size
        fields: list[Any] = []
        for name, value in rng.choice(lists):
            kind = rng.random()
            fields.append(NeverIndexedHeaderTuple(name, value) if kind < 0.15
                          else HeaderTuple(name, value) if kind < 0.9 else (name, value))
        yield encoder.encode(fields, huffman=rng.random() < 0.5), size


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_kept_decoder_reads_every_block_as_hpack_does(
        seed: int, caplog: pytest.LogCaptureFixture) -> None:
    kept, reference = KeptDecoder(65536), Decoder(65536)
    unchanging = 0
    with caplog.at_level(logging.DEBUG, logger="hpack.hpack"):
        for block, size in _random_blocks(seed, 400):
            before = list(reference.header_table.dynamic_entries)
            want = reference.decode(block, raw=True)
            if keeps_tables(block):  # what makes a block safe to keep: it changed nothing
                unchanging += 1
                assert size is None
                assert list(reference.header_table.dynamic_entries) == before
            assert _kinds(kept.decode(block, raw=True)) == _kinds(want)
        assert 0 < unchanging < 400
        # hpack logs each block it decodes: the reference's 400, and the kept decoder's.
        by_hpack = sum(1 for record in caplog.records if record.msg == "Decoding %s")
        assert by_hpack < 800  # some blocks were answered from what was kept
        # An answer's two blocks, repeated as a server repeats them, are decoded once each.
        caplog.clear()
        # The newest entry of the dynamic table by its index (static :status 200 if none),
        # and a literal grpc-message.
        indexed = b"\xbe" if reference.header_table.dynamic_entries else b"\x88"
        for block in (indexed, b"\x88" + stateless_block([(b"grpc-message", b"")])):
            for _ in range(10):
                assert _kinds(kept.decode(block, raw=True)) \
                    == _kinds(reference.decode(block, raw=True))
        assert sum(1 for record in caplog.records if record.msg == "Decoding %s") == 20 + 2


def test_a_large_block_is_decoded_each_time_not_kept(caplog: pytest.LogCaptureFixture) -> None:
    block = stateless_block([(b"x-large", b"v" * 2000)])
    assert keeps_tables(block)
    kept = KeptDecoder(65536)
    with caplog.at_level(logging.DEBUG, logger="hpack.hpack"):
        for _ in range(3):
            assert _kinds(kept.decode(block, raw=True)) == [(b"x-large", b"v" * 2000, False)]
    assert sum(1 for record in caplog.records if record.msg == "Decoding %s") == 3


def test_keeps_tables_refuses_what_is_not_a_whole_block() -> None:
    assert keeps_tables(b"\x88\xc0")
    assert not keeps_tables(b"\x40\x01a\x01b")  # incremental indexing
    assert not keeps_tables(b"\x3f\xe1\x1f")  # a size update
    assert not keeps_tables(b"\x00\x05ab")  # a string cut short
    assert not keeps_tables(b"\xff")  # an integer cut short


class _Recorder:
    def __init__(self) -> None:
        self.metadata: list[dict[str, Any]] = []

    def __call__(self, request: bytes, context: Any) -> bytes:
        self.metadata.append(dict(context.invocation_metadata()))
        return request


def test_a_grpcio_server_reads_the_metadata_of_every_call_on_one_connection() -> None:
    recorder = _Recorder()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "test.Blocks", {"Call": grpc.unary_unary_rpc_method_handler(recorder)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    client = GrpcClient.tcp(f"127.0.0.1:{port}")
    try:
        for call, metadata in enumerate(METADATA * 3):
            assert client.unary("/test.Blocks/Call", b"m%d" % call, 10.0, metadata) \
                == b"m%d" % call
            got = recorder.metadata[-1]
            for key, value in metadata:
                assert got[key] == value
            assert str(got["user-agent"]).startswith(USER_AGENT)
    finally:
        client.close()
        server.stop(None).wait(5)
