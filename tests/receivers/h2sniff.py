"""Detect gRPC message compression from the raw client-to-server HTTP/2 bytes.

grpcio consumes the ``grpc-encoding`` header before handlers see metadata, so a
Python servicer cannot tell whether a request was compressed. Each gRPC message
is framed as ``flag(1) length(4) payload``; flag 1 means compressed, and gzip
payloads start with the gzip magic. Reading DATA frames is enough, so no HPACK
decoding is needed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
_FRAME_HEADER = 9
_DATA = 0x0
_RST_STREAM = 0x3
_END_STREAM = 0x1
_PADDED = 0x8
_GZIP_MAGIC = b"\x1f\x8b"


def classify(flag: int, head: bytes) -> str | None:
    """Name the compression of one gRPC message: None (identity), gzip, deflate, unknown."""
    if flag == 0:
        return None
    if head.startswith(_GZIP_MAGIC):
        return "gzip"
    if head[:1] == b"\x78":
        return "deflate"
    return "unknown"


@dataclass
class _Message:
    """Parse state of the gRPC message stream inside one HTTP/2 stream."""

    prefix: bytearray = field(default_factory=bytearray)
    flag: int = 0
    remaining: int = 0
    head: bytearray = field(default_factory=bytearray)
    in_body: bool = False


class H2CompressionSniffer:
    """Incrementally parses client->server bytes; ``last`` is the latest message's compression.

    ``seen`` counts complete message prefixes so callers can tell "identity"
    (``last is None`` with ``seen > 0``) from "nothing parsed yet".
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._preface_done = False
        self._streams: dict[int, _Message] = {}
        self.last: str | None = None
        self.seen = 0
        self._opaque = False

    def feed(self, data: bytes) -> None:
        """Consume bytes exactly as they travel to the server."""
        if self._opaque:
            return
        self._buf += data
        if not self._preface_done:
            if len(self._buf) < len(_PREFACE):
                return
            if bytes(self._buf[: len(_PREFACE)]) != _PREFACE:
                # Not cleartext HTTP/2 (TLS, say): nothing to see, so stop buffering.
                self._opaque = True
                self._buf.clear()
                return
            del self._buf[: len(_PREFACE)]
            self._preface_done = True
        while len(self._buf) >= _FRAME_HEADER:
            length = int.from_bytes(self._buf[0:3], "big")
            if len(self._buf) < _FRAME_HEADER + length:
                return
            frame_type = self._buf[3]
            flags = self._buf[4]
            stream_id = int.from_bytes(self._buf[5:9], "big") & 0x7FFFFFFF
            payload = bytes(self._buf[_FRAME_HEADER : _FRAME_HEADER + length])
            del self._buf[: _FRAME_HEADER + length]
            if frame_type == _DATA:
                self._data(stream_id, flags, payload)
            elif frame_type == _RST_STREAM:
                self._streams.pop(stream_id, None)

    def _data(self, stream_id: int, flags: int, payload: bytes) -> None:
        if flags & _PADDED and payload:
            pad = payload[0]
            payload = payload[1 : len(payload) - pad]
        state = self._streams.setdefault(stream_id, _Message())
        self._messages(state, payload)
        if flags & _END_STREAM:
            self._streams.pop(stream_id, None)

    def _messages(self, state: _Message, data: bytes) -> None:
        pos = 0
        while pos < len(data):
            if not state.in_body:
                take = min(5 - len(state.prefix), len(data) - pos)
                state.prefix += data[pos : pos + take]
                pos += take
                if len(state.prefix) == 5:
                    state.flag = state.prefix[0]
                    state.remaining = int.from_bytes(state.prefix[1:5], "big")
                    state.prefix.clear()
                    state.head.clear()
                    state.in_body = True
                    if state.remaining == 0:
                        self._complete(state)
                continue
            take = min(state.remaining, len(data) - pos)
            if len(state.head) < 2:
                state.head += data[pos : pos + min(take, 2 - len(state.head))]
            state.remaining -= take
            pos += take
            if len(state.head) >= 2 or state.remaining == 0:
                self._complete(state)

    def _complete(self, state: _Message) -> None:
        """Record the message's compression once its first payload bytes are known."""
        if state.flag != -1:
            self.last = classify(state.flag, bytes(state.head))
            self.seen += 1
            state.flag = -1  # recorded; keep skipping the body
        if state.remaining == 0:
            state.in_body = False
