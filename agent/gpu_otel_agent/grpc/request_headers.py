"""A unary call's request headers, built once per method and metadata, in h2's sending form.

h2 normalises and validates every header list it sends (lower-cases names, strips
whitespace, drops connection headers, makes credentials never-indexed, checks the
pseudo-headers): about a quarter of each call's ``send_headers``, for a list that is the
same from call to call but for ``grpc-timeout``. The list is built here, once, already in
that form (bytes, the names lower-case, ``authorization`` never-indexed as h2's own rule
makes it), and the call tells h2 (``H2Configuration``'s public flags) to send it as it is.
Only metadata of the plain kind gRPC metadata is (token names, printable ASCII values
without surrounding whitespace, no connection or pseudo-header names) takes that path;
anything else is sent as before, through h2's normalisation and validation, and fails or
passes exactly as it did (``plain``).

``grpc-timeout`` changes with every call, so it goes out never-indexed: indexed, each call
added a new entry to the HPACK table, which filled and evicted the constant headers (sent
again as literals), and every header's table search scanned the whole table.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from hpack import HeaderTuple, NeverIndexedHeaderTuple

from gpu_otel_agent.grpc.header_blocks import stateless_block, timeout_field
from gpu_otel_agent.grpc.messages import metadata_value

Metadata = tuple[tuple[str, str | bytes], ...]
Header = tuple[bytes, bytes] | HeaderTuple

_NAME = re.compile(r"[0-9a-z_.-]+\Z")  # gRPC's header names (PROTOCOL-HTTP2.md), lower-case
_VALUE = re.compile(r"[\x21-\x7e]([\x20-\x7e]*[\x21-\x7e])?\Z|\Z")  # printable, unpadded
# Names h2's normalisation drops or changes, or its validation checks: left to it.
_NOT_PLAIN = frozenset({"connection", "proxy-connection", "keep-alive", "transfer-encoding",
                        "upgrade", "te", "host", "cookie"})
_CREDENTIALS = frozenset({"authorization", "proxy-authorization"})  # h2: never-indexed


@dataclass(frozen=True)
class RequestHeaders:
    """The headers before and after ``grpc-timeout``; ``plain`` when h2 would send them
    unchanged and accept them (its outbound normalisation and validation can be skipped).
    ``head_block``/``tail_block``: their HPACK block, independent of any table state
    (``header_blocks``), when plain; the call's block is ``block``."""

    head: tuple[Header, ...]
    tail: tuple[Header, ...]
    plain: bool
    head_block: bytes = b""
    tail_block: bytes = b""

    def with_timeout(self, timeout: str) -> list[Header]:
        return [*self.head, NeverIndexedHeaderTuple(b"grpc-timeout", timeout.encode()),
                *self.tail]

    def block(self, timeout: str) -> bytes:
        """The HPACK block of ``with_timeout(timeout)`` (plain headers only)."""
        return self.head_block + timeout_field(timeout.encode()) + self.tail_block


def request_headers(path: str, *, scheme: str, authority: str, user_agent: str, gzip: bool,
                    metadata: Iterable[tuple[str, str | bytes]]) -> RequestHeaders:
    """The headers of a call to ``path`` (PROTOCOL-HTTP2.md's Request-Headers), metadata last."""
    head = ((b":method", b"POST"), (b":scheme", scheme.encode()), (b":path", path.encode()),
            (b":authority", authority.encode()), (b"te", b"trailers"),
            (b"content-type", b"application/grpc"), (b"user-agent", user_agent.encode()))
    tail: list[Header] = [(b"grpc-accept-encoding", b"identity,gzip")]
    if gzip:
        tail.append((b"grpc-encoding", b"gzip"))
    fixed_plain = all(_VALUE.match(value.decode("latin-1")) for _, value in head)
    plain = fixed_plain
    for raw_key, raw_value in metadata:
        key, value = raw_key.lower(), metadata_value(raw_value)
        if not (_NAME.match(key) and key not in _NOT_PLAIN and _VALUE.match(value)):
            plain = False
        encoded = (key.encode("utf-8"), value.encode("utf-8"))
        tail.append(NeverIndexedHeaderTuple(*encoded) if key in _CREDENTIALS else encoded)
    if not plain:  # sent through h2's checks and hpack's encoder
        return RequestHeaders(head, tuple(tail), plain)
    return RequestHeaders(head, tuple(tail), plain, stateless_block(head), stateless_block(tail))
