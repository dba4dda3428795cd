"""gRPC status codes, the error a call ends with, and how HTTP/2 outcomes map onto codes.

The agent's own gRPC client (``grpc.unary_client``) does not load grpcio, so the codes are its own:
the 17 of https://grpc.github.io/grpc/core/md_doc_statuscodes.html with their names and
numbers. The mappings follow the gRPC project's documents: ``http-grpc-status-mapping.md``
for an HTTP status that is not 200, and PROTOCOL-HTTP2.md's "Errors" section for a stream
reset (RST_STREAM) or a connection ended (GOAWAY).
"""

from __future__ import annotations

import enum

from h2.errors import ErrorCodes

Metadata = tuple[tuple[str, str | bytes], ...]  # (lower-case key, value); ``-bin``: bytes


class StatusCode(enum.IntEnum):
    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8
    FAILED_PRECONDITION = 9
    ABORTED = 10
    OUT_OF_RANGE = 11
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14
    DATA_LOSS = 15
    UNAUTHENTICATED = 16


class GrpcError(Exception):
    """A call that did not end OK: its code, the server's (or our) words, its trailers.

    When the call failed on our side (connect, TLS, socket) the Python exception is the
    ``__cause__``, so a caller can tell a refused connection from a certificate problem.
    """

    def __init__(self, code: StatusCode, details: str = "",
                 trailing_metadata: Metadata = ()) -> None:
        super().__init__(f"{code.name}: {details}" if details else code.name)
        self.code = code
        self.details = details
        self.trailing_metadata = trailing_metadata


# http-grpc-status-mapping.md: a response that is not gRPC's own (a proxy's, say).
_HTTP_STATUS = {
    400: StatusCode.INTERNAL,
    401: StatusCode.UNAUTHENTICATED,
    403: StatusCode.PERMISSION_DENIED,
    404: StatusCode.UNIMPLEMENTED,
    429: StatusCode.UNAVAILABLE,
    502: StatusCode.UNAVAILABLE,
    503: StatusCode.UNAVAILABLE,
    504: StatusCode.UNAVAILABLE,
}

# PROTOCOL-HTTP2.md, "Errors": RST_STREAM / GOAWAY error codes as the client sees them.
_RESET: dict[int, StatusCode] = {
    ErrorCodes.NO_ERROR: StatusCode.INTERNAL,  # reset before the trailers came
    ErrorCodes.PROTOCOL_ERROR: StatusCode.INTERNAL,
    ErrorCodes.INTERNAL_ERROR: StatusCode.INTERNAL,
    ErrorCodes.FLOW_CONTROL_ERROR: StatusCode.INTERNAL,
    ErrorCodes.SETTINGS_TIMEOUT: StatusCode.INTERNAL,
    ErrorCodes.FRAME_SIZE_ERROR: StatusCode.INTERNAL,
    ErrorCodes.REFUSED_STREAM: StatusCode.UNAVAILABLE,  # not processed: safe to send again
    ErrorCodes.CANCEL: StatusCode.CANCELLED,
    ErrorCodes.COMPRESSION_ERROR: StatusCode.INTERNAL,
    ErrorCodes.CONNECT_ERROR: StatusCode.INTERNAL,
    ErrorCodes.ENHANCE_YOUR_CALM: StatusCode.RESOURCE_EXHAUSTED,
    ErrorCodes.INADEQUATE_SECURITY: StatusCode.PERMISSION_DENIED,
}


def from_http_status(status: int) -> StatusCode:
    return _HTTP_STATUS.get(status, StatusCode.UNKNOWN)


def from_reset(error_code: int | None) -> StatusCode:
    """The code of a stream the server reset (unknown extension codes: INTERNAL)."""
    return _RESET.get(error_code, StatusCode.INTERNAL) if error_code is not None \
        else StatusCode.INTERNAL


_BY_TEXT = {str(code.value).encode(): code for code in StatusCode}  # b"0": OK ...


def from_grpc_status(value: bytes | None) -> StatusCode:
    """The ``grpc-status`` header's code; a missing or foreign value reads as UNKNOWN."""
    known = _BY_TEXT.get(value) if value is not None else None
    if known is not None:  # the usual spelling, without the enum's Python lookup
        return known
    try:
        return StatusCode(int(value or b""))
    except ValueError:
        return StatusCode.UNKNOWN
