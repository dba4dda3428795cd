"""h2's own normalisation and check of the headers a server sends, run on the events h2 made
of them, and remembered for the answers that repeat.

h2 normalises (joins cookie fields) and validates every inbound header block (RFC 9113 8.2,
issue 39: a hostile collector's headers are refused) with ``normalize_inbound_headers`` and
``validate_headers``, chains of generators over each field: about 27 µs per call for
grpcio's two blocks (answer headers and trailers), the same fields every time. Here h2 is
configured not to (``normalize_inbound_headers=False``, ``validate_inbound_headers=False``, its
public flags) and the connection passes each batch's events here right after
``receive_data``: the same functions of h2's, in h2's order, with the flags h2 builds from the
same event (``H2Stream._build_hdr_validation_flags``), and the event's headers replaced by
what they give, as h2 would have listed them. A block that passed is remembered by its headers
and flags, with what normalisation made of it, so the next identical one is not run through
them again: both are pure functions of those two. A failure raises the ``ProtocolError`` h2
would have raised, before any event of the batch is used (h2 raised from ``receive_data``,
and the batch's events were lost with it); the caller drops the connection on it as before.

Bounded for a hostile peer: at most ``_KEPT`` blocks of at most ``_KEPT_BYTES`` bytes each are
remembered; others are run through h2's functions every time.

Private h2 API, pinned with ``h2>=4.1,<5`` and checked by tests/unit/grpc/
test_inbound_headers.py against h2's own pipeline: ``h2.utilities.validate_headers``,
``normalize_inbound_headers`` and ``HeaderValidationFlags``.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain

from h2.events import (
    Event,
    InformationalResponseReceived,
    PushedStreamReceived,
    RequestReceived,
    ResponseReceived,
    TrailersReceived,
)
from h2.utilities import HeaderValidationFlags, normalize_inbound_headers, validate_headers

_KEPT = 8
_KEPT_BYTES = 512

# As h2 builds them for a client (is_trailer, is_response_header, is_push_promise per event).
_FLAGS: dict[type[Event], HeaderValidationFlags] = {
    ResponseReceived: HeaderValidationFlags(True, False, True, False),
    InformationalResponseReceived: HeaderValidationFlags(True, False, True, False),
    TrailersReceived: HeaderValidationFlags(True, True, False, False),
    PushedStreamReceived: HeaderValidationFlags(True, False, False, True),
    RequestReceived: HeaderValidationFlags(True, False, False, False),
}

Key = tuple[HeaderValidationFlags, tuple[tuple[bytes, bytes], ...]]
_UNSEEN: tuple[tuple[bytes, bytes], ...] = ((b"", b""),)  # a marker, compared by identity


class InboundHeaders:
    """Normalises and validates the header blocks among a client connection's received
    events, as h2 would have."""

    def __init__(self) -> None:
        # (flags, headers as received) -> the headers as h2 hands them on: None when its
        # normalisation changed nothing (no cookie fields to join).
        self._valid: dict[Key, tuple[tuple[bytes, bytes], ...] | None] = {}

    def check(self, events: Sequence[Event]) -> None:
        """Raises h2's ``ProtocolError`` for the first header block h2 would have refused;
        a block with cookie fields is given the form h2's normalisation gives it."""
        for event in events:
            flags = _FLAGS.get(type(event))
            if flags is None:
                continue
            headers = tuple(event.headers or ())  # type: ignore[attr-defined]
            key = (flags, headers)
            known = self._valid.get(key, _UNSEEN)
            if known is _UNSEEN:
                # h2's pipeline: normalise, then validate what that gave (raises on a bad field).
                normal = tuple(normalize_inbound_headers(headers, flags))
                for _ in validate_headers(normal, flags):
                    pass
                known = None if normal == headers else normal
                if sum(map(len, chain.from_iterable(headers))) <= _KEPT_BYTES:
                    if len(self._valid) >= _KEPT:
                        self._valid.clear()
                    self._valid[key] = known
            if known is not None:
                event.headers = list(known)  # type: ignore[attr-defined]
