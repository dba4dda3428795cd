"""The server's headers normalised and checked after h2 reads them (``grpc.inbound_headers``)
against h2's own inbound pipeline.

The contract with h2's private ``normalize_inbound_headers``, ``validate_headers`` and
``HeaderValidationFlags``: the client's ``Connection`` (h2 with ``normalize_inbound_headers``
and ``validate_inbound_headers`` off, then ``InboundHeaders``) gives, for the same bytes from a
server, the same events (cookie fields joined and moved as h2 does) as an ``H2Connection``
configured as h2's defaults, or the same ``ProtocolError`` (type and message), over random
answers whose headers and trailers repeat (so remembered blocks are met again, in either
role) and break RFC 9113's rules in the ways h2 checks.
"""

from __future__ import annotations

import random
import socket
import time
from collections.abc import Iterator

import pytest
from h2.config import H2Configuration
from h2.connection import H2Connection
from h2.events import Event, ResponseReceived, TrailersReceived
from h2.exceptions import ProtocolError

from gpu_otel_agent.grpc import inbound_headers
from gpu_otel_agent.grpc.connection import Connection
from gpu_otel_agent.grpc.inbound_headers import InboundHeaders

Fields = list[tuple[bytes, bytes]]
REQUEST = [(":method", "POST"), (":scheme", "http"), (":path", "/s/M"),
           (":authority", "x:1"), ("te", "trailers"), ("content-type", "application/grpc")]
# Fields valid in an answer, and the kinds h2 refuses (RFC 9113 8.2 and 8.3).
VALID: Fields = [
    (b"content-type", b"application/grpc"), (b"grpc-status", b"0"), (b"grpc-status", b"14"),
    (b"grpc-message", b"ok%20then"), (b"grpc-accept-encoding", b"identity, gzip"),
    (b"cookie", b"a=1"), (b"cookie", b"b=2"), (b"x-bin", b"AAEC"),
]
BAD: Fields = [
    (b":status", b"200"), (b":status", b"100"), (b":path", b"/"), (b":bogus", b"1"),
    (b"Content-Type", b"application/grpc"), (b"connection", b"close"), (b"te", b"trailers"),
    (b"te", b"gzip"), (b"x-pad", b" lead"), (b"x-pad", b"trail "), (b"", b"empty"),
    (b"x-nul", b"a\x00b"), (b"x\nname", b"v"), (b"host", b"elsewhere"),
]
DATA = b"\x00\x00\x00\x00\x00"


def _block(rng: random.Random, status: bool) -> Fields:
    fields = rng.sample(VALID, rng.randint(0, 3))
    if rng.random() < 0.3:
        fields.insert(rng.randint(0, len(fields)), rng.choice(BAD))
    return ([(b":status", b"200")] if status else []) + fields


def _server() -> H2Connection:
    # Sends whatever it is given: the client's reading is what is under test.
    return H2Connection(H2Configuration(client_side=False, header_encoding=None,
                                        validate_outbound_headers=False,
                                        normalize_outbound_headers=False,
                                        validate_inbound_headers=False))


def _seen(events: list[Event]) -> list[str]:
    return [repr(event) for event in events]


class _Pair:
    """Our Connection and a default-validating h2 client, on one server's bytes."""

    def __init__(self) -> None:
        self.ours_sock, self.theirs = socket.socketpair()
        self.ours = Connection(self.ours_sock)
        self.reference = H2Connection(H2Configuration(client_side=True, header_encoding=None))
        self.reference.initiate_connection()
        self.reference.data_to_send()
        self.server = _server()
        self.server.initiate_connection()
        self.server.receive_data(self.ours.h2.data_to_send())

    def call(self, answer: list[tuple[Fields, bool]], data: bool
             ) -> tuple[object, object] | None:
        """Our outcome and the reference's; None when the server's h2 would not send it."""
        stream_id = self.ours.h2.get_next_available_stream_id()
        self.ours.h2.send_headers(stream_id, REQUEST)
        self.reference.send_headers(stream_id, REQUEST)
        self.reference.data_to_send()
        self.server.receive_data(self.ours.h2.data_to_send())
        try:
            for number, (fields, end) in enumerate(answer):
                self.server.send_headers(stream_id, fields, end_stream=end)
                if number == 0 and data:
                    self.server.send_data(stream_id, DATA)
        except (ProtocolError, IndexError):  # an informational END_STREAM, an empty block
            return None
        sent = self.server.data_to_send()
        self.theirs.sendall(sent)
        return _outcome(lambda: self.ours.read(time.monotonic() + 10)), \
            _outcome(lambda: self.reference.receive_data(sent))

    def close(self) -> None:
        self.ours.close()
        self.theirs.close()


def _outcome(read: object) -> object:
    try:
        return _seen(read())  # type: ignore[operator]
    except ProtocolError as error:
        return (type(error).__name__, str(error))


@pytest.fixture
def pairs() -> Iterator[list[_Pair]]:
    made: list[_Pair] = []
    yield made
    for pair in made:
        pair.close()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_connection_reads_every_answer_as_h2s_own_validation_does(
        seed: int, pairs: list[_Pair]) -> None:
    rng = random.Random(seed)
    # A few answers, repeated: remembered blocks come back, in the same role and the other.
    blocks = [_block(rng, rng.random() < 0.5) for _ in range(8)] + [
        [(b":status", b"200"), (b"content-type", b"application/grpc")], [(b"grpc-status", b"0")]]
    refused = accepted = 0
    pair = None
    for _ in range(150):
        if pair is None:
            pair = _Pair()
            pairs.append(pair)
        trailers = rng.random() < 0.8
        answer = [(rng.choice(blocks), not trailers)]
        if trailers:
            answer.append((rng.choice(blocks), True))
        outcomes = pair.call(answer, data=trailers and rng.random() < 0.5)
        if outcomes is None:
            pair = None
            continue
        ours, reference = outcomes
        assert ours == reference, answer
        if isinstance(ours, tuple):
            refused += 1
            pair = None  # h2 ends the connection on it; so does the client
        else:
            accepted += 1
    assert refused > 10 and accepted > 10  # both ways were met


def test_a_block_that_passed_as_headers_is_refused_as_trailers(pairs: list[_Pair]) -> None:
    pair = _Pair()
    pairs.append(pair)
    headers = [(b":status", b"200"), (b"content-type", b"application/grpc")]
    for _ in range(2):  # the second time from what was remembered
        accepted = pair.call([(headers, False), ([(b"grpc-status", b"0")], True)], data=True)
        assert accepted is not None and accepted[0] == accepted[1]
        assert not isinstance(accepted[0], tuple)
    refused = pair.call([(headers, False), (headers, True)], data=False)
    assert refused is not None and refused[0] == refused[1]
    assert isinstance(refused[0], tuple) and "pseudo" in refused[0][1].lower()


def test_blocks_that_passed_are_not_checked_again_and_large_ones_every_time(
        monkeypatch: pytest.MonkeyPatch) -> None:
    checked: list[int] = []
    from h2.utilities import validate_headers as real

    def counting(headers: Fields, flags: object) -> object:
        checked.append(len(headers))
        return real(headers, flags)  # type: ignore[arg-type]  # h2's own

    monkeypatch.setattr(inbound_headers, "validate_headers", counting)
    small = ResponseReceived(stream_id=1, headers=[(b":status", b"200")])
    large = TrailersReceived(stream_id=1, headers=[(b"grpc-status", b"0"), (b"x", b"y" * 600)])
    check = InboundHeaders()
    for _ in range(3):
        check.check([small, large])
    assert checked == [1, 2, 2, 2]
