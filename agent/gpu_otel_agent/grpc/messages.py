"""What goes into and comes out of one unary gRPC call, as PROTOCOL-HTTP2.md spells it.

Out: the 5-byte length-prefixed message (gzip'd with the compressed flag when asked) and the
``grpc-timeout`` header. In: the response as the HTTP/2 events left it, read into the
message's bytes or a :class:`GrpcError` with the status from the trailers (or a trailers-only
response), from a non-200 HTTP status, or from a stream reset; ``grpc-message`` is
percent-decoded and ``-bin`` metadata base64-decoded.
"""

from __future__ import annotations

import base64
import binascii
import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from h2.errors import ErrorCodes
from h2.events import ConnectionTerminated

from gpu_otel_agent.grpc.status import (
    GrpcError,
    Metadata,
    StatusCode,
    from_grpc_status,
    from_http_status,
    from_reset,
)

PREFIX = struct.Struct(">BI")  # compressed flag, message length
_RESERVED = frozenset({b"grpc-status", b"grpc-message", b"content-type"})


def grpc_timeout(seconds: float) -> str:
    """The ``grpc-timeout`` value: at most 8 digits, in the finest unit that fits, rounded
    up so the server never gives up before the client would."""
    for unit, per_second in (("u", 1e6), ("m", 1e3), ("S", 1.0), ("M", 1 / 60)):
        value = max(int(-(-seconds * per_second // 1)), 1)
        if value < 10**8:
            return f"{value}{unit}"
    return f"{min(max(int(seconds / 3600), 1), 10**8 - 1)}H"


def frame(message: bytes | bytearray, gzip: bool) -> tuple[bytes, bytes | bytearray]:
    """One length-prefixed message as (prefix, body): compressed flag 1 and the body gzip'd
    when ``gzip``. Kept apart, so the body is sent from its own buffer: joining them copied
    the whole request once more (issue 30: 2-3 payload-sized copies per export). A
    ``bytearray`` (the metric encoder's request buffer) is sent as it is, not copied."""
    if gzip:
        body = zlib.compress(message, 6, wbits=31)  # wbits 31: the gzip format
        return PREFIX.pack(1, len(body)), body
    return PREFIX.pack(0, len(message)), message


def metadata_value(value: str | bytes) -> str:
    """Only ``-bin`` keys carry bytes: base64, unpadded as the spec recommends."""
    return base64.b64encode(value).rstrip(b"=").decode("ascii") if isinstance(value, bytes) \
        else value


@dataclass
class Response:
    """One call's answer as far as it has come."""

    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    trailers: list[tuple[bytes, bytes]] | None = None
    data: bytearray = field(default_factory=bytearray)
    ended: bool = False
    reset: int | None = None  # the server's RST_STREAM error code
    goaway: ConnectionTerminated | None = None

    @property
    def done(self) -> bool:
        return self.ended or self.reset is not None or self.goaway is not None


def _metadata(pairs: Iterable[tuple[bytes, bytes]]) -> Metadata:
    """Response headers as gRPC metadata; ``-bin`` values decoded (padded or not)."""
    out: list[tuple[str, str | bytes]] = []
    for raw_key, value in pairs:
        if raw_key.startswith(b":") or raw_key in _RESERVED:
            continue
        key = raw_key.decode("ascii", "replace")
        if key.endswith("-bin"):
            try:
                out.append((key, base64.b64decode(value + b"=" * (-len(value) % 4))))
            except (binascii.Error, ValueError):
                out.append((key, value))  # left as it came: the reader decides
        else:
            out.append((key, value.decode("utf-8", "replace")))
    return tuple(out)


def _header(pairs: Iterable[tuple[bytes, bytes]], name: bytes) -> bytes | None:
    for key, value in pairs:  # a loop, not next() over a generator: run 3 times a call
        if key == name:
            return value
    return None


def outcome(response: Response, max_receive: int) -> bytes:
    """The response message of a call that ended OK; else the GrpcError it ended with."""
    if response.reset is not None:
        raise GrpcError(from_reset(response.reset),
                        f"stream reset by the server ({code_name(response.reset)})")
    status = _header(response.headers, b":status")
    # Trailers-only: a status without a body comes in the headers.
    trailers = response.trailers if response.trailers is not None else response.headers
    message = _header(trailers, b"grpc-message")
    details = unquote_to_bytes(message).decode("utf-8", "replace") if message else ""
    if status != b"200":
        shown = status.decode("ascii", "replace") if status else "none"
        raise GrpcError(from_http_status(int(status) if status and status.isdigit() else 0),
                        f"HTTP status {shown}" + (f": {details}" if details else ""),
                        _metadata(trailers))
    grpc_status = _header(trailers, b"grpc-status")
    code = from_grpc_status(grpc_status)
    if grpc_status is None:
        details = details or "the server sent no grpc-status"
    if code is not StatusCode.OK:
        raise GrpcError(code, details, _metadata(trailers))
    return _payload(response, max_receive)


def _payload(response: Response, max_receive: int) -> bytes:
    data = response.data
    if len(data) < PREFIX.size:
        raise GrpcError(StatusCode.INTERNAL, "OK without a response message")
    flag, length = PREFIX.unpack_from(data)
    if len(data) != PREFIX.size + length:
        raise GrpcError(StatusCode.INTERNAL, "not exactly one response message")
    payload = bytes(data[PREFIX.size:])
    if not flag:
        return payload
    encoding = _header(response.headers, b"grpc-encoding")
    if encoding != b"gzip":
        raise GrpcError(StatusCode.INTERNAL, f"response compressed with {encoding!r}")
    try:
        message = zlib.decompressobj(wbits=31).decompress(payload, max_receive + 1)
    except zlib.error as error:
        raise GrpcError(StatusCode.INTERNAL, f"bad gzip response: {error}") from error
    if len(message) > max_receive:
        raise too_large(max_receive)
    return message


def too_large(limit: int) -> GrpcError:
    return GrpcError(StatusCode.RESOURCE_EXHAUSTED, f"response larger than {limit} bytes")


def code_name(code: int | None) -> str:
    """An HTTP/2 error code's name (RST_STREAM, GOAWAY)."""
    if code is None:
        return "?"
    try:
        return ErrorCodes(code).name
    except ValueError:
        return str(code)
