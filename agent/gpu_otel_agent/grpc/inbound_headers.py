"""h2's own check of the headers a server sends, run on the events h2 made of them, and
remembered for the answers that repeat.

h2 validates every inbound header block (RFC 9113 8.2, issue 39: a hostile collector's
headers are refused) with ``validate_headers``, a chain of seven generators over each field:
about 27 µs per call for grpcio's two blocks (answer headers and trailers), the same
fields every time. Here h2 is configured not to (``validate_inbound_headers=False``, its
public flag) and the connection passes each batch's events here right after
``receive_data``: the same function of h2's, with the flags h2 builds from the same event
(``H2Stream._build_hdr_validation_flags``), on the same headers (after h2's normalisation,
which runs before its validation too). A block that passed is remembered by its headers and
flags, so the next identical one is not checked again: validation is a pure function of
those two. A failure raises the ``ProtocolError`` h2 would have raised, before any event of
the batch is used (h2 raised from ``receive_data``, and the batch's events were lost with
it); the caller drops the connection on it as before.

Bounded for a hostile peer: at most ``_KEPT`` blocks of at most ``_KEPT_BYTES`` bytes each are
remembered; others are checked every time.

Private h2 API, pinned with ``h2>=4.1,<5`` and checked by tests/unit/grpc/
test_inbound_headers.py against h2's own validation: ``h2.utilities.validate_headers`` and
``HeaderValidationFlags``.
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
from h2.utilities import HeaderValidationFlags, validate_headers

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


class InboundHeaders:
    """Validates the header blocks among a client connection's received events."""

    def __init__(self) -> None:
        self._valid: set[Key] = set()

    def check(self, events: Sequence[Event]) -> None:
        """Raises h2's ``ProtocolError`` for the first header block h2 would have refused."""
        for event in events:
            flags = _FLAGS.get(type(event))
            if flags is None:
                continue
            headers = tuple(event.headers or ())  # type: ignore[attr-defined]
            key = (flags, headers)
            if key in self._valid:
                continue
            for _ in validate_headers(headers, flags):  # raises on a bad field
                pass
            if sum(map(len, chain.from_iterable(headers))) <= _KEPT_BYTES:
                if len(self._valid) >= _KEPT:
                    self._valid.clear()
                self._valid.add(key)
