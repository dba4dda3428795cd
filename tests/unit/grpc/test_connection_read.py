"""``Connection.read`` hands h2 whole frames however the bytes arrive: split anywhere across
reads (a frame's header, its body, several frames in one read), the events are those of h2
reading the same bytes at once."""

from __future__ import annotations

import random
import socket
import time

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import Event

from gpu_otel_agent.grpc.connection import Connection

REQUEST = [(":method", "POST"), (":scheme", "http"), (":path", "/s/M"),
           (":authority", "x:1"), ("te", "trailers"), ("content-type", "application/grpc")]


def _answers(server: H2Connection, streams: list[int], size: int) -> bytes:
    for stream_id in streams:
        server.send_headers(stream_id, [(":status", "200"), ("content-type", "application/grpc")])
        for start in range(0, size, 16_384):  # frames of at most the default 16 KiB
            server.send_data(stream_id, bytes(min(16_384, size - start)))
        server.send_headers(stream_id, [("grpc-status", "0")], end_stream=True)
    server.ping(b"12345678")
    return server.data_to_send()


@pytest.mark.parametrize("seed", [1, 2])
def test_frames_split_anywhere_read_as_h2_reads_them_whole(seed: int) -> None:
    rng = random.Random(seed)
    ours_sock, theirs = socket.socketpair()
    ours = Connection(ours_sock)
    reference = H2Connection(H2Configuration(client_side=True, header_encoding=None))
    reference.initiate_connection()
    server = H2Connection(H2Configuration(client_side=False, header_encoding=None))
    server.initiate_connection()
    server.receive_data(ours.h2.data_to_send())
    streams = []
    for _ in range(3):
        stream_id = ours.h2.get_next_available_stream_id()
        ours.h2.send_headers(stream_id, REQUEST, end_stream=True)
        reference.send_headers(stream_id, REQUEST, end_stream=True)
        streams.append(stream_id)
    server.receive_data(ours.h2.data_to_send())
    # h2's default 65,535-byte windows: 20,000 bytes each stays within them.
    sent = _answers(server, streams, 20_000)
    expected = [repr(event) for event in reference.receive_data(sent)]
    seen: list[Event] = []
    try:
        at = 0
        while at < len(sent):
            step = rng.choice([1, 5, 9, 10, rng.randint(1, 40_000)])
            theirs.sendall(sent[at:at + step])
            at += step
            seen.extend(ours.read(time.monotonic() + 10))
        while ours.readable():  # what a read left in the socket
            seen.extend(ours.read(time.monotonic() + 10))
    finally:
        ours.close()
        theirs.close()
    assert [repr(event) for event in seen] == expected
    assert len(expected) > 10
