"""HPACK for the unary client's connection: request blocks written once, answers kept.

A unary call's request headers are the same from call to call but for ``grpc-timeout``,
yet hpack's ``Encoder`` searched its tables and wrote every field again (about 15 % of a
call's instructions), and the ``Decoder`` decoded the server's answer and trailers again
though a gRPC server sends the same indexed fields every time (about 9 %; issue 41).

Out (``BlockEncoder``): the constant fields are written once per method and metadata, as
HPACK literals *without indexing* (credentials: *never indexed*, as h2 sends them), which
need no encoder state: the block is valid whatever the dynamic tables hold. It is made by
hpack's own public ``Encoder`` (each field alone as a ``NeverIndexedHeaderTuple``, whose
representation differs from "without indexing" only in bit 0x10 of its first byte, RFC 7541
6.2.2/6.2.3); a field in the static table with its value is indexed (0x80), stateless too.
``grpc-timeout`` is written per call, never indexed, as before. A table-size change the
server asked for (SETTINGS_HEADER_TABLE_SIZE) still leads the next block: hpack writes it.
Any header list other than the one announced (``precoded``) is hpack's, unchanged.

In (``KeptDecoder``): a block of indexed fields and literals that are not indexed changes
no table, so its headers are a function of its bytes and the decoder's dynamic table; such
a block is kept with its headers until a block that changes the table (a literal with
incremental indexing, a size update) is decoded, and the same bytes are answered from it
meanwhile. A grpc server's answer is so from its second call on (grpcio: the headers
indexed, the trailers an indexed ``grpc-status`` and a literal ``grpc-message``). Every
block's headers are still validated by h2 after decoding, as before (issue 39): only
hpack's work is skipped, not h2's checks.

Private h2 state, pinned with ``h2>=4.1,<5`` and checked by tests/unit/grpc/
test_header_blocks.py: ``H2Connection.encoder`` / ``.decoder``, the hpack objects h2 uses
for every block (replaced before the connection sends or reads anything).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from hpack import Decoder, Encoder, HeaderTuple, NeverIndexedHeaderTuple

Header = tuple[bytes, bytes] | HeaderTuple

_NEVER_INDEXED = 0x10  # RFC 7541 6.2.3; without it (0x00), 6.2.2: literal without indexing
_LITERAL_MASK = 0xF0  # the representation's kind, in a literal's first byte
_TIMEOUT_NAME = b"grpc-timeout"
_KEPT_BLOCKS = 8  # blocks kept at once (a unary answer has two: headers, trailers)
# The largest block kept: a gRPC answer's are tens of bytes; a peer's large blocks are decoded
# each time rather than held (8 of h2's 64 KiB header lists would be 512 KiB; issue 39).
_KEPT_BLOCK_BYTES = 512


def stateless_field(header: Header) -> bytes:
    """One field's HPACK representation that reads the same whatever the tables hold:
    indexed when the static table has the field, else a literal without indexing, or never
    indexed for a ``NeverIndexedHeaderTuple`` (credentials) as hpack would send it."""
    name, value = header
    encoded = bytearray(Encoder().encode([NeverIndexedHeaderTuple(name, value)]))
    never = isinstance(header, HeaderTuple) and not header.indexable
    if encoded[0] & _LITERAL_MASK == _NEVER_INDEXED and not never:
        encoded[0] &= ~_NEVER_INDEXED & 0xFF
    return bytes(encoded)


def stateless_block(headers: Iterable[Header]) -> bytes:
    return b"".join(stateless_field(header) for header in headers)


# grpc-timeout's field up to its value: never indexed, its name a literal (not in the static
# table) Huffman-coded by hpack once.
_TIMEOUT_HEAD = Encoder().encode([NeverIndexedHeaderTuple(_TIMEOUT_NAME, b"")])[:-1]


def timeout_field(value: bytes) -> bytes:
    """``grpc-timeout: value``, never indexed; the value as a raw string (at most 8 digits
    and a unit, so its length fits the 7-bit prefix)."""
    return _TIMEOUT_HEAD + bytes((len(value),)) + value


class BlockEncoder(Encoder):
    """hpack's ``Encoder``, but a header list announced with ``precoded`` is sent as the
    block given for it (see the module's docstring); everything else is hpack's."""

    def __init__(self) -> None:
        super().__init__()
        self._expected: list[Header] | None = None
        self._block = b""

    def precoded(self, headers: list[Header], block: bytes) -> None:
        """The next ``encode`` of a list equal to ``headers`` answers ``block`` (once)."""
        self._expected = headers
        self._block = block

    def encode(self, headers: Any, huffman: bool = True) -> bytes:
        expected, self._expected = self._expected, None
        # h2 rebuilds the list (``utf8_encode_headers``), so it is compared, not identified.
        if expected is None or headers != expected:
            return super().encode(headers, huffman)
        if self.table_size_changes:  # the server's new table size comes first (hpack's)
            return super().encode(()) + self._block
        return self._block


def _integer(block: bytes, at: int, prefix_bits: int) -> tuple[int, int]:
    """An HPACK integer (RFC 7541 5.1) at ``at``: (value, the index after it)."""
    limit = (1 << prefix_bits) - 1
    value = block[at] & limit
    at += 1
    if value < limit:
        return value, at
    shift = 0
    while True:
        byte = block[at]
        at += 1
        value += (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def keeps_tables(block: bytes) -> bool:
    """Whether decoding ``block`` (a block hpack decoded without error) leaves the dynamic
    table as it was: only indexed fields (RFC 7541 6.1) and literals without indexing or
    never indexed (6.2.2, 6.2.3); no literal with incremental indexing (6.2.1) and no
    table-size update (6.3). Anything unexpected reads as a change."""
    at = 0
    try:
        while at < len(block):
            first = block[at]
            if first & 0x80:  # indexed field
                _, at = _integer(block, at, 7)
                continue
            if first & 0x60:  # 0x40: adds to the table; 0x20: resizes it
                return False
            name_index, at = _integer(block, at, 4)
            strings = 1 if name_index else 2  # a literal name, then the value
            for _ in range(strings):
                length, at = _integer(block, at, 7)
                at += length
        return at == len(block)
    except IndexError:
        return False


class KeptDecoder(Decoder):
    """hpack's ``Decoder``, answering a repeated block that changes no table from what it
    decoded the last time, while no block that changes one has been decoded since."""

    def __init__(self, max_header_list_size: int) -> None:
        super().__init__(max_header_list_size)
        self._kept: dict[tuple[bytes, bool, int, int], Sequence[HeaderTuple]] = {}

    def decode(self, data: bytes, raw: bool = False) -> Any:
        # The limits are part of the key: a block decoded under other limits is decoded again
        # (hpack checks the list's size and the table's against them).
        key = (bytes(data), raw, self.max_header_list_size, self.max_allowed_table_size)
        kept = self._kept.get(key)
        if kept is not None:
            return list(kept)
        headers = list(super().decode(data, raw))
        if not keeps_tables(data):
            self._kept.clear()  # the table may have changed: what was kept may read otherwise
        elif len(self._kept) < _KEPT_BLOCKS and len(data) <= _KEPT_BLOCK_BYTES:
            self._kept[key] = tuple(headers)
        return headers
