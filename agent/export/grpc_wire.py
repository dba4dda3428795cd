"""A small blocking gRPC client for unary calls: the pure-Python ``h2`` over a plain socket.

Why not grpcio: the agent only ever makes unary calls with requests it encoded itself, and
grpcio's C core cost more than the rest of the exporter together (issue 17: its ``cygrpc``
library was 14.8 MiB of the agent's 65 MiB resident set, and its event-engine, lifeguard and
timer threads burned about 1.1 ms of CPU a second while idle and 1 ms more per export). This
client is one socket, one lock and the ``h2`` state machine, on the caller's own thread.

It follows PROTOCOL-HTTP2.md of the gRPC project: the socket and TLS are ``grpc_connection``'s,
framing and reading the answer ``grpc_messages``', the codes ``grpc_status``'. Here: the
request headers (``te: trailers``, ``grpc-timeout`` from what is left of the deadline,
``grpc-encoding``, metadata), the message sent within HTTP/2 flow control (only what the
server's windows allow, reading its WINDOW_UPDATEs when they are used up), and the answer read
until the stream ends, is reset, or the connection ends. Every socket operation has a timeout
equal to what is left of the deadline, so a call ends by it (DEADLINE_EXCEEDED); connect, DNS,
TLS and socket failures are UNAVAILABLE with the Python exception as the cause.

One connection is kept across calls. Before each call it is checked without blocking: a
GOAWAY or end of stream that arrived while it was idle means a fresh connection is made
before anything is sent. Any failure on the socket, and a call that ran out of time, drop
it (a peer that did not answer within the deadline is not trusted with the next call).
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Iterable

from h2.errors import ErrorCodes
from h2.events import (
    ConnectionTerminated,
    DataReceived,
    Event,
    ResponseReceived,
    StreamEnded,
    StreamReset,
    TrailersReceived,
)
from h2.exceptions import H2Error, NoAvailableStreamIDError

from gpu_otel_agent.export.grpc_connection import (
    Connection,
    Opener,
    left,
    tcp_opener,
    unix_opener,
)
from gpu_otel_agent.export.grpc_messages import (
    PREFIX,
    Response,
    code_name,
    frame,
    grpc_timeout,
    metadata_value,
    outcome,
    too_large,
)
from gpu_otel_agent.export.grpc_status import GrpcError, StatusCode
from gpu_otel_agent.version import USER_AGENT

MAX_RECEIVE = 16 * 1024 * 1024  # the largest answer accepted (the kubelet's own limit)
_FLUSH_AT = 65536  # request bytes queued in h2 before they go to the socket

MetadataIn = Iterable[tuple[str, str | bytes]]


class GrpcClient:
    """Unary gRPC calls to one server over one kept connection, one call at a time."""

    def __init__(self, opener: Opener, authority: str, *, tls: bool, gzip: bool = False,
                 max_receive: int = MAX_RECEIVE, user_agent: str = USER_AGENT) -> None:
        self._open = opener
        self._authority = authority
        self._scheme = "https" if tls else "http"
        self._gzip = gzip
        self._max_receive = max_receive
        self._user_agent = user_agent
        self._lock = threading.Lock()
        self._connection: Connection | None = None
        self._closed = False

    @classmethod
    def tcp(cls, endpoint: str, context: ssl.SSLContext | None = None,
            *, gzip: bool = False) -> GrpcClient:
        """``endpoint`` is ``host:port``; TLS when a context is given (``tls_context``)."""
        return cls(tcp_opener(endpoint, context), endpoint, tls=context is not None,
                   gzip=gzip)

    @classmethod
    def unix(cls, path: str, *, max_receive: int = MAX_RECEIVE) -> GrpcClient:
        # The authority gRPC clients send over a unix socket.
        return cls(unix_opener(path), "localhost", tls=False, max_receive=max_receive)

    def unary(self, path: str, request: bytes, timeout_s: float,
              metadata: MetadataIn = ()) -> bytes:
        """The response message's bytes, or :class:`GrpcError`; ends by ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._lock:
            if self._closed:
                raise GrpcError(StatusCode.CANCELLED, "the client was closed")
            try:
                connection = self._connected(deadline)
                response = self._exchange(connection, path, request, deadline, metadata)
            except TimeoutError as error:
                self._drop()
                raise GrpcError(StatusCode.DEADLINE_EXCEEDED,
                                f"no answer within {timeout_s:g}s") from error
            except (OSError, H2Error, ValueError) as error:
                # ValueError: an SSL socket shut down by close() from another thread. A
                # protocol error is UNAVAILABLE too: the connection is unusable, not the call
                # (h2 refuses frames after a graceful GOAWAY that grpc servers still send).
                self._drop()
                raise GrpcError(StatusCode.UNAVAILABLE, f"{type(error).__name__}: {error}"
                                ) from error
            finally:
                if self._connection is not None and not self._connection.alive:
                    self._drop()  # GOAWAY, an oversized answer: not for the next call
            return outcome(response, self._max_receive)

    def close(self) -> None:
        """Closes the connection; a call in progress ends at once (UNAVAILABLE)."""
        self._closed = True
        connection = self._connection
        if connection is not None:
            connection.abort()
        with self._lock:
            self._drop()

    def disconnect(self) -> None:
        """Drops the connection; the next call opens a fresh one."""
        with self._lock:
            self._drop()

    def _connected(self, deadline: float) -> Connection:
        connection = self._connection
        if connection is not None and connection.usable_after_idle(deadline):
            return connection
        self._drop()
        connection = Connection(self._open(left(deadline)))
        self._connection = connection
        return connection

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _headers(self, path: str, deadline: float,
                 metadata: MetadataIn) -> list[tuple[str, str]]:
        headers = [(":method", "POST"), (":scheme", self._scheme), (":path", path),
                   (":authority", self._authority), ("te", "trailers"),
                   ("content-type", "application/grpc"), ("user-agent", self._user_agent),
                   ("grpc-timeout", grpc_timeout(left(deadline))),
                   ("grpc-accept-encoding", "identity,gzip")]
        if self._gzip:
            headers.append(("grpc-encoding", "gzip"))
        headers.extend((key.lower(), metadata_value(value)) for key, value in metadata)
        return headers

    def _exchange(self, connection: Connection, path: str, request: bytes,
                  deadline: float, metadata: MetadataIn) -> Response:
        h2 = connection.h2
        try:
            stream_id = h2.get_next_available_stream_id()
        except NoAvailableStreamIDError:
            connection.alive = False  # used up; the next call opens another
            raise
        response = Response()
        h2.send_headers(stream_id, self._headers(path, deadline, metadata))
        self._send(connection, stream_id, frame(request, self._gzip), deadline, response)
        while not response.done:
            self._apply(connection, connection.read(deadline), stream_id, response)
        if response.goaway is not None and not response.ended:
            raise ConnectionAbortedError("the server ended the connection (GOAWAY "
                                         f"{code_name(response.goaway.error_code)})")
        return response

    def _send(self, connection: Connection, stream_id: int, body: bytes, deadline: float,
              response: Response) -> None:
        """Sends as much as the server's windows allow, reading (its WINDOW_UPDATEs) when
        they are used up; stops early if the server has already answered."""
        h2 = connection.h2
        view = memoryview(body)
        offset = queued = 0
        while offset < len(body):
            if response.done:
                # Answered before it read the whole request (an error status, a reset).
                if response.reset is None and response.goaway is None:
                    h2.reset_stream(stream_id, ErrorCodes.CANCEL)
                break
            room = min(h2.local_flow_control_window(stream_id), h2.max_outbound_frame_size,
                       len(body) - offset)
            if room <= 0:
                connection.flush(deadline)
                queued = 0
                self._apply(connection, connection.read(deadline), stream_id, response)
                continue
            h2.send_data(stream_id, view[offset:offset + room],
                         end_stream=offset + room == len(body))
            offset += room
            queued += room
            if queued >= _FLUSH_AT:
                connection.flush(deadline)
                queued = 0
        connection.flush(deadline)

    def _apply(self, connection: Connection, events: list[Event], stream_id: int,
               response: Response) -> None:
        for event in events:
            if isinstance(event, DataReceived) and event.stream_id is not None:
                # Any stream's data, read, is handed back to the connection's window.
                connection.h2.acknowledge_received_data(event.flow_controlled_length or 0,
                                                        event.stream_id)
            if isinstance(event, ConnectionTerminated):
                connection.alive = False
                response.goaway = event
            elif getattr(event, "stream_id", None) != stream_id:
                continue
            elif isinstance(event, ResponseReceived):
                response.headers = list(event.headers or ())
            elif isinstance(event, TrailersReceived):
                response.trailers = list(event.headers or ())
            elif isinstance(event, DataReceived):
                response.data += event.data or b""
                if len(response.data) > self._max_receive + PREFIX.size:
                    connection.alive = False
                    raise too_large(self._max_receive)
            elif isinstance(event, StreamEnded):
                response.ended = True
            elif isinstance(event, StreamReset) and not response.ended:
                # After the trailers a reset only stops the rest of our request.
                response.reset = int(event.error_code if event.error_code is not None
                                     else ErrorCodes.INTERNAL_ERROR)
