"""The HTTP/2 DATA-frame sniffer, fed byte by byte to exercise every split point."""

from __future__ import annotations

import gzip

from tests.receivers.h2sniff import H2CompressionSniffer

PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def _frame(frame_type: int, flags: int, stream: int, payload: bytes) -> bytes:
    return (
        len(payload).to_bytes(3, "big")
        + bytes([frame_type, flags])
        + stream.to_bytes(4, "big")
        + payload
    )


def _grpc_message(payload: bytes, compressed: bool) -> bytes:
    return bytes([int(compressed)]) + len(payload).to_bytes(4, "big") + payload


def _state(sniffer: H2CompressionSniffer) -> tuple[int, str | None]:
    return sniffer.seen, sniffer.last


def _feed_bytewise(sniffer: H2CompressionSniffer, data: bytes) -> None:
    for i in range(len(data)):
        sniffer.feed(data[i : i + 1])


def test_detects_gzip_split_across_padded_frames() -> None:
    message = _grpc_message(gzip.compress(b"x" * 100), compressed=True)
    half = len(message) // 2
    padded = bytes([3]) + message[half:] + b"\x00\x00\x00"
    wire = (
        PREFACE
        + _frame(0x4, 0, 0, b"")  # SETTINGS
        + _frame(0x1, 0x4, 1, b"\x82\x86")  # HEADERS (content ignored)
        + _frame(0x0, 0, 1, message[:half])
        + _frame(0x0, 0x1 | 0x8, 1, padded)  # END_STREAM | PADDED
    )
    sniffer = H2CompressionSniffer()
    _feed_bytewise(sniffer, wire)
    assert (sniffer.seen, sniffer.last) == (1, "gzip")


def test_identity_after_gzip_on_same_connection() -> None:
    sniffer = H2CompressionSniffer()
    sniffer.feed(PREFACE + _frame(0x0, 0x1, 1, _grpc_message(gzip.compress(b"a" * 50), True)))
    assert _state(sniffer) == (1, "gzip")
    sniffer.feed(_frame(0x0, 0x1, 3, _grpc_message(b"plain", False)))
    assert _state(sniffer) == (2, None)
