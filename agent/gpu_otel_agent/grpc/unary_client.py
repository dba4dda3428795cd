"""A small blocking gRPC client for unary calls: the pure-Python ``h2`` over a plain socket.

Why not grpcio: the agent only ever makes unary calls with requests it encoded itself, and
grpcio's C core cost more than the rest of the exporter together (issue 17: its ``cygrpc``
library was 14.8 MiB of the agent's 65 MiB resident set, and its event-engine, lifeguard and
timer threads burned about 1.1 ms of CPU a second while idle and 1 ms more per export). This
client is one socket, one lock and the ``h2`` state machine, on the caller's own thread.

It follows PROTOCOL-HTTP2.md of the gRPC project: the socket and TLS are ``grpc.connection``'s,
framing and reading the answer ``grpc.messages``', the codes ``grpc.status``'. Here: the
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

from h2.connection import H2Connection
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

from gpu_otel_agent.grpc.connection import (
    Connection,
    Opener,
    left,
    tcp_opener,
    unix_opener,
)
from gpu_otel_agent.grpc.direct_data import data_frames, scatters, send_all
from gpu_otel_agent.grpc.messages import (
    PREFIX,
    Response,
    code_name,
    frame,
    grpc_timeout,
    outcome,
    too_large,
)
from gpu_otel_agent.grpc.request_headers import RequestHeaders, request_headers
from gpu_otel_agent.grpc.status import GrpcError, StatusCode
from gpu_otel_agent.version import USER_AGENT

MAX_RECEIVE = 16 * 1024 * 1024  # the largest answer accepted (the kubelet's own limit)
_FLUSH_AT = 65536  # request bytes queued in h2 before they go to the socket
# Request bytes per DATA frame sent through h2 (a unix socket; TCP: ``direct_data``),
# whatever larger frame the server allows: h2 copies a frame three times on its way out
# (serialise, join, its buffer), and a 275 kB frame made those copies payload-sized (169
# minor page faults per export). 64 KiB pieces keep every copy under glibc's mmap threshold
# (128 KiB), so they reuse heap buffers (no page faults, as with the 16 KiB pieces before), in
# a quarter of the frames: each frame is a pass through h2's send_data in Python (issue 41).
_CHUNK = 65536
# The request's last bytes, sent through h2 with END_STREAM (the rest: ``direct_data``).
_THROUGH_H2 = 1024
# A connection idle this long is checked with a PING before the next call (an HTTP/2
# keepalive): a NAT or load balancer may have dropped it silently, and a call sent into a
# dead connection waits for its whole deadline. Five minutes is the least interval grpc
# servers accept without data (grpc-core's and grpc-go's keepalive enforcement default).
PING_AFTER_IDLE_S = 300.0
PING_TIMEOUT_S = 5.0

MetadataIn = Iterable[tuple[str, str | bytes]]


class GrpcClient:
    """Unary gRPC calls to one server over one kept connection, one call at a time."""

    def __init__(self, opener: Opener, authority: str, *, tls: bool, gzip: bool = False,
                 max_receive: int = MAX_RECEIVE, user_agent: str = USER_AGENT,
                 ping_after_idle_s: float = PING_AFTER_IDLE_S) -> None:
        self._open = opener
        self._authority = authority
        self._scheme = "https" if tls else "http"
        self._gzip = gzip
        self._max_receive = max_receive
        self._user_agent = user_agent
        self._lock = threading.Lock()
        self._connection: Connection | None = None
        self._closed = False
        self._ping_after_idle_s = ping_after_idle_s
        self._direct = False  # the connection's DATA frames go by ``direct_data``
        self.pings = 0  # keepalive PINGs sent (answered or not)
        # The last call's headers (path, metadata, built): a sender calls one method with
        # the same metadata every time.
        self._built: tuple[str, tuple[tuple[str, str | bytes], ...], RequestHeaders] | None \
            = None

    @classmethod
    def tcp(cls, endpoint: str, context: ssl.SSLContext | None = None,
            *, gzip: bool = False, max_receive: int = MAX_RECEIVE) -> GrpcClient:
        """``endpoint`` is ``host:port``; TLS when a context is given (``tls_context``)."""
        return cls(tcp_opener(endpoint, context), endpoint, tls=context is not None,
                   gzip=gzip, max_receive=max_receive)

    @classmethod
    def unix(cls, path: str, *, max_receive: int = MAX_RECEIVE) -> GrpcClient:
        # The authority gRPC clients send over a unix socket.
        return cls(unix_opener(path), "localhost", tls=False, max_receive=max_receive)

    def unary(self, path: str, request: bytes | bytearray, timeout_s: float,
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
            if connection.idle_s() < self._ping_after_idle_s:
                return connection
            self.pings += 1
            if connection.ping(min(deadline, time.monotonic() + PING_TIMEOUT_S)):
                return connection
        self._drop()
        connection = Connection(self._open(left(deadline)))
        self._connection = connection
        # Read once per connection: ``socket.family`` is a Python property (an enum lookup).
        self._direct = scatters(connection.sock)
        return connection

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def _headers(self, path: str, metadata: MetadataIn) -> RequestHeaders:
        pairs = metadata if isinstance(metadata, tuple) else tuple(metadata)
        built = self._built
        if built is None or built[0] != path or built[1] != pairs:
            built = (path, pairs, request_headers(
                path, scheme=self._scheme, authority=self._authority,
                user_agent=self._user_agent, gzip=self._gzip, metadata=pairs))
            self._built = built
        return built[2]

    def _exchange(self, connection: Connection, path: str, request: bytes | bytearray,
                  deadline: float, metadata: MetadataIn) -> Response:
        h2 = connection.h2
        try:
            stream_id = h2.get_next_available_stream_id()
        except NoAvailableStreamIDError:
            connection.alive = False  # used up; the next call opens another
            raise
        response = Response()
        headers = self._headers(path, metadata)
        # Plain headers are sent as built (``request_headers``); others through h2's checks.
        # (Set when it changes: h2's config flags are Python descriptors.)
        if connection.outbound_checked is headers.plain:
            config = h2.config
            config.normalize_outbound_headers = config.validate_outbound_headers = \
                connection.outbound_checked = not headers.plain
        timeout = grpc_timeout(left(deadline))
        listed = headers.with_timeout(timeout)
        if headers.plain:  # their block, written once (``header_blocks``)
            connection.encoder.precoded(listed, headers.block(timeout))
        h2.send_headers(stream_id, listed)
        self._send(connection, stream_id, frame(request, self._gzip), deadline, response)
        while not response.done:
            self._apply(connection, connection.read(deadline), stream_id, response)
        connection.used()
        if response.goaway is not None and not response.ended:
            raise ConnectionAbortedError("the server ended the connection (GOAWAY "
                                         f"{code_name(response.goaway.error_code)})")
        return response

    def _send(self, connection: Connection, stream_id: int,
              framed: tuple[bytes, bytes | bytearray],
              deadline: float, response: Response) -> None:
        """Sends the message (``prefix`` then ``body``, read in place) as far as the server's
        windows allow, reading (its WINDOW_UPDATEs) when they are used up; stops early if the
        server has already answered."""
        h2 = connection.h2
        prefix, body = framed
        view = memoryview(body)
        total = len(prefix) + len(body)
        offset = queued = 0  # of the framed message
        # All but the last bytes go from the request's buffer to the socket (``direct_data``);
        # the last, with END_STREAM, through h2, which closes our side of the stream.
        direct_until = total - _THROUGH_H2 if self._direct else 0
        if direct_until <= len(prefix):
            direct_until = 0  # a small request: all through h2
        while offset < total:
            if response.done:
                # Answered before it read the whole request (an error status, a reset): stop
                # the rest, unless the answer closed the stream already (trailers and a
                # RST_STREAM in one read: resetting a closed stream raised, and the real
                # status was lost for UNAVAILABLE).
                if (response.reset is None and response.goaway is None
                        and _open(h2, stream_id)):
                    h2.reset_stream(stream_id, ErrorCodes.CANCEL)
                break
            window = h2.local_flow_control_window(stream_id)
            if offset < direct_until and window > 0 and _open(h2, stream_id):
                end = offset + min(window, direct_until - offset)
                buffers = data_frames(h2, stream_id, prefix=prefix, body=view, start=offset,
                                      end=end)
                if end == direct_until and window - (end - offset) >= total - end:
                    # The last piece fits the window too: in the same write.
                    h2.send_data(stream_id, view[end - len(prefix):], end_stream=True)
                    buffers.append(h2.data_to_send())
                    end = total
                send_all(connection.sock, buffers, deadline)
                if end == total:
                    return  # all of it, and what h2 had queued, went in that write
                offset = end
                continue
            room = min(window, h2.max_outbound_frame_size, _CHUNK, total - offset)
            if room <= 0 or (offset == 0 and room < len(prefix)):  # the prefix goes whole
                connection.flush(deadline)
                queued = 0
                self._apply(connection, connection.read(deadline), stream_id, response)
                continue
            if offset == 0:
                piece: bytes | memoryview = prefix + view[:room - len(prefix)]  # 64 KiB
            else:
                start = offset - len(prefix)
                piece = view[start:start + room]
            h2.send_data(stream_id, piece, end_stream=offset + room == total)
            offset += room
            queued += room
            if queued >= _FLUSH_AT:
                connection.flush(deadline)
                queued = 0
        connection.flush(deadline)

    def _apply(self, connection: Connection, events: list[Event], stream_id: int,
               response: Response) -> None:
        for event in events:
            if isinstance(event, DataReceived):
                # Any stream's data, read, is handed back to the connection's window.
                if event.stream_id is not None:
                    connection.h2.acknowledge_received_data(event.flow_controlled_length or 0,
                                                            event.stream_id)
                if event.stream_id == stream_id:
                    response.data += event.data or b""
                    if len(response.data) > self._max_receive + PREFIX.size:
                        connection.alive = False
                        raise too_large(self._max_receive)
            elif isinstance(event, ConnectionTerminated):
                connection.alive = False  # no new call on it
                if not _lets_finish(event, stream_id):
                    response.goaway = event
                # else a graceful GOAWAY (NO_ERROR) that covers this stream: the server will
                # still answer it (RFC 9113 6.8; grpc servers do on a graceful stop), and the
                # connection lets h2 take that answer (``Connection.read``).
            elif getattr(event, "stream_id", None) != stream_id:
                continue
            elif isinstance(event, ResponseReceived):
                response.headers = list(event.headers or ())
            elif isinstance(event, TrailersReceived):
                response.trailers = list(event.headers or ())
            elif isinstance(event, StreamEnded):
                response.ended = True
            elif isinstance(event, StreamReset) and not response.ended:
                # After the trailers a reset only stops the rest of our request.
                response.reset = int(event.error_code if event.error_code is not None
                                     else ErrorCodes.INTERNAL_ERROR)


def _open(h2: H2Connection, stream_id: int) -> bool:
    """Whether the stream can still be reset (not closed by either side)."""
    stream = h2.streams.get(stream_id)
    return stream is not None and not stream.closed


def _lets_finish(event: ConnectionTerminated, stream_id: int) -> bool:
    """A GOAWAY after which the server still answers ``stream_id``."""
    return (event.error_code == ErrorCodes.NO_ERROR and event.last_stream_id is not None
            and stream_id <= event.last_stream_id)
