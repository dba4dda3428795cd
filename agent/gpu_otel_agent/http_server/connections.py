"""A small HTTP/1.1 server: bounded threads, bounded connections, timeouts; ``h11`` reads.

One event loop, on a thread of its own, owns every socket of a listener: accepting, TLS
handshakes, reading request heads, writing responses. An idle or slow client therefore costs a
few kilobytes and no thread (``http.server`` gave each connection a thread blocked in
``readline``, with a listen backlog of 5). Building a response — authorisation (bcrypt is slow
on purpose), encoding a scrape, gzip — runs in a fixed pool of ``Limits.workers`` threads, so
the agent's thread count does not grow with its clients and the loop never waits on CPU work.
The listener is any stream socket: TCP for ``/metrics``, a Unix socket for the local endpoint.
The loop thread is supervised (``threads/supervised.py``): a bug that ends it is counted and
the same loop runs again, with the listener and open connections still registered.

The HTTP/1.1 syntax (request line, header fields, keep-alive, framing of what is sent) is
``h11``'s; this module adds what a server on a GPU node needs around it.

Limits, and what happens at them:

- ``max_connections`` open at once: one more evicts the connection idle the longest (waiting
  for a request); if every connection is busy, the new one is closed. A flood of idle sockets
  thus cannot lock Prometheus out.
- ``header_timeout``: a new connection must finish its TLS handshake and send a complete
  request head within it (slowloris), or it is closed; ``idle_timeout`` is the same for the
  next request on a kept-alive connection (longer than the usual 15-60 s scrape interval, so
  Prometheus keeps its connection). ``write_timeout`` bounds sending a response to a client
  that does not read.
- A request head larger than ``max_head_bytes`` is answered 431 (reads are at most that size,
  so a connection never holds more than twice it); a request with a body, 400; a method other
  than GET or HEAD, 405; an HTTP version other than 1.0 and 1.1, 505; anything h11 cannot
  read (a malformed request line or header field, an HTTP/1.1 request without ``Host``), 400.
  Each of those closes the connection.
- What an unauthenticated connection holds is bounded: the socket's reads are paused past
  ``RECORD_BYTES`` buffered, TLS is this server's own (``tls.py``: no state at all until
  the client sends its first bytes, then reads of one TLS record, not asyncio's 256 KiB
  buffer per connection), and a request head is read in slices of ``max_head_bytes``.
- Requests are sorted on the loop before any thread is asked (``triage``): what costs
  nothing (a probe, a refusal of a malformed credential, a credential verified before) is
  answered or passed on at once; a credential never seen goes to ``check`` on a thread of its
  own (bcrypt is slow on purpose), at most ``max_checks`` waiting or running, past which the
  request is answered 429 at once. So probes and known scrapers never wait behind password
  guesses (issue 39: 64 guessing clients made every /healthz exceed the kubelet's 5 s).
- ``max_handshakes`` TLS handshakes under way at once: one more evicts the oldest (a client
  that sent part of a ClientHello and stopped), so stalled handshakes hold a bounded amount.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import http
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import h11

from gpu_otel_agent.http_server.http_date import http_date
from gpu_otel_agent.http_server.tls import RECORD_BYTES, TlsStream
from gpu_otel_agent.threads.named import name_pool_thread
from gpu_otel_agent.threads.supervised import SupervisedThread

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Limits:
    max_connections: int = 512
    # TLS handshakes under way at once (the client has sent bytes, the handshake is not
    # done): one more evicts the oldest. A stalled handshake holds OpenSSL's state (about
    # 45 KiB measured); a real one takes milliseconds.
    max_handshakes: int = 64
    # Credential checks (``check``) waiting or running; one more is answered 429.
    max_checks: int = 8
    workers: int = 2
    header_timeout: float = 10.0
    idle_timeout: float = 75.0
    write_timeout: float = 30.0
    max_head_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        for name in ("max_connections", "max_handshakes", "max_checks", "workers",
                     "max_head_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"Limits.{name} must be at least 1")
        for name in ("header_timeout", "idle_timeout", "write_timeout"):
            if not getattr(self, name) > 0:
                raise ValueError(f"Limits.{name} must be positive")


@dataclass(frozen=True)
class Request:
    method: str
    target: str
    version: str
    headers: Mapping[str, str]  # names in lower case; repeated headers joined with ", "

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


@dataclass(frozen=True)
class Response:
    status: int
    body: bytes
    content_type: str = "text/plain; charset=utf-8"
    headers: tuple[tuple[str, str], ...] = ()
    close: bool = False  # close the connection after this response


Handler = Callable[[Request], Response]
# On the loop, before any thread: a Response to send now; True, on to the handler; False,
# the request needs ``Check`` first.
Triage = Callable[[Request], "Response | bool"]
# On the checking thread: None, on to the handler; else the refusal to send.
Check = Callable[[Request], "Response | None"]
# The answer to a refused request (status, what was wrong); plain text unless a listener
# speaks another language (the local endpoint answers JSON).
ErrorResponse = Callable[[int, str], Response]


def plain_error(status: int, message: str) -> Response:
    return Response(status, (message + "\n").encode())


class BadRequest(Exception):
    def __init__(self, status: int, message: str,
                 headers: tuple[tuple[str, str], ...] = ()) -> None:
        super().__init__(message)
        self.status = status
        self.headers = headers


def _request(event: h11.Request) -> Request:
    headers: dict[str, str] = {}
    for raw_name, raw_value in event.headers:
        key, value = raw_name.decode("latin-1"), raw_value.decode("latin-1")
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return Request(event.method.decode("latin-1"), event.target.decode("latin-1"),
                   "HTTP/" + event.http_version.decode("latin-1"), headers)


def _refusal(request: Request) -> BadRequest | None:
    """What h11 accepts but this server does not: other versions, methods, a body."""
    if request.version not in ("HTTP/1.1", "HTTP/1.0"):
        return BadRequest(505, "unsupported version")
    if request.method not in ("GET", "HEAD"):
        return BadRequest(405, f"{request.method}: this endpoint is read-only (GET and HEAD "
                          "only)", (("Allow", "GET, HEAD"),))
    length = request.header("content-length")
    if request.header("transfer-encoding") is not None or (
            length is not None and length.strip() != "0"):
        return BadRequest(400, "a request body is not expected")
    return None


def _serialize(conn: h11.Connection, response: Response, *, head_only: bool,
               extra: Mapping[str, str]) -> bytes:
    headers = [("Date", http_date()),
               ("Content-Type", response.content_type),
               ("Content-Length", str(len(response.body))),
               *{**extra, **dict(response.headers)}.items()]
    if response.close:
        headers.append(("Connection", "close"))
    try:
        reason = http.HTTPStatus(response.status).phrase
    except ValueError:
        reason = ""
    data = conn.send(h11.Response(status_code=response.status, headers=headers, reason=reason))
    if not head_only and response.body:
        data += conn.send(h11.Data(data=response.body))
    return data + conn.send(h11.EndOfMessage())


class _PlainStream:
    """The connection's bytes as they come (what :class:`TlsStream` is over TLS)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._reader = reader
        self._writer = writer

    async def read(self, limit: int) -> bytes:
        return await self._reader.read(limit)

    def write(self, data: bytes) -> None:
        self._writer.write(data)

    async def drain(self) -> None:
        await self._writer.drain()

    def close(self) -> None:
        return None


Stream = _PlainStream | TlsStream


@dataclass
class _Connection:
    writer: asyncio.StreamWriter
    idle_since: float | None = field(default_factory=time.monotonic)  # None: serving


class HttpServer:
    """Serves ``handler`` on ``sock`` (already listening) from a loop thread of its own.

    ``tls`` is asked once per connection for the context to wrap it in (None: plain HTTP),
    so a rotated certificate applies to the next connection. ``headers`` gives the header
    fields every response carries (the web config's).
    """

    def __init__(self, sock: socket.socket, handler: Handler,
                 tls: Callable[[], ssl.SSLContext | None],
                 headers: Callable[[], Mapping[str, str]], limits: Limits, *,
                 error: ErrorResponse = plain_error, name: str = "prometheus-http",
                 worker_name: str = "prometheus-worker", triage: Triage | None = None,
                 check: Check | None = None) -> None:
        self._sock = sock
        self._handler = handler
        self._triage = triage
        self._check = check
        self._checks = 0  # waiting or running on the checker
        self._checker = concurrent.futures.ThreadPoolExecutor(
            1, thread_name_prefix=f"{worker_name}-auth", initializer=name_pool_thread)
        self._tls = tls
        self._headers = headers
        self._error = error
        self._name = name
        self.limits = limits
        self._loop = asyncio.new_event_loop()
        self._workers = concurrent.futures.ThreadPoolExecutor(
            limits.workers, thread_name_prefix=worker_name, initializer=name_pool_thread)
        self._stopping = threading.Event()
        self._connections: dict[asyncio.StreamWriter, _Connection] = {}
        self._handshaking: dict[asyncio.StreamWriter, None] = {}  # oldest first
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self.evicted = 0
        self.evicted_handshakes = 0
        self.throttled = 0  # requests answered 429: too many credential checks at once
        self.refused = 0
        self.requests = 0

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._sock.getsockname()[:2]
        return str(host), int(port)

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    @property
    def handshakes(self) -> int:
        """TLS handshakes under way (the client has sent bytes, the handshake is not done)."""
        return len(self._handshaking)

    def start(self) -> None:
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = SupervisedThread(self._run, self._name, args=(ready,),
                                        stopping=self._stopping)
        self._thread.start()
        ready.result()

    def _run(self, ready: concurrent.futures.Future[None]) -> None:
        """The loop thread's work; run again on the same loop if a bug ends it (supervised:
        the listener and the open connections stay registered with the loop)."""
        if not ready.done():
            asyncio.set_event_loop(self._loop)
            try:
                # ``limit``: a connection's reads pause past twice this buffered, so a client
                # that sends faster than it is served is held at a few records.
                self._server = self._loop.run_until_complete(asyncio.start_server(
                    self._serve, sock=self._sock, backlog=socket.SOMAXCONN,
                    limit=RECORD_BYTES))
            except BaseException as error:
                ready.set_exception(error)
                return
            ready.set_result(None)
        self._loop.run_forever()  # until stop()
        self._loop.run_until_complete(self._loop.shutdown_asyncgens())
        self._loop.close()

    def stop(self) -> None:
        if self._thread is None:
            return
        self._stopping.set()
        future = asyncio.run_coroutine_threadsafe(self._close(), self._loop)
        try:
            future.result(timeout=5)
        except (concurrent.futures.TimeoutError, RuntimeError) as error:
            log.warning("%s did not stop cleanly: %s", self._name, error)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._workers.shutdown(wait=False, cancel_futures=True)
        self._checker.shutdown(wait=False, cancel_futures=True)
        self._thread = None

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        for writer in list(self._connections):
            writer.transport.abort()
        if self._server is not None:
            await self._server.wait_closed()

    def _admit(self, writer: asyncio.StreamWriter) -> bool:
        if len(self._connections) < self.limits.max_connections:
            return True
        idle = [(c.idle_since, w) for w, c in self._connections.items()
                if c.idle_since is not None]
        if not idle:
            self.refused += 1
            return False
        _, oldest = min(idle, key=lambda pair: pair[0])
        self.evicted += 1
        oldest.transport.abort()  # its _serve sees the connection lost and forgets it
        self._connections.pop(oldest, None)
        return True

    def _start_handshake(self, writer: asyncio.StreamWriter) -> None:
        if len(self._handshaking) >= self.limits.max_handshakes:
            oldest = next(iter(self._handshaking))
            self.evicted_handshakes += 1
            oldest.transport.abort()  # its _serve sees the connection lost and forgets it
            self._handshaking.pop(oldest, None)
        self._handshaking[writer] = None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._admit(writer):
            writer.transport.abort()
            return
        state = _Connection(writer)
        self._connections[writer] = state
        peer = writer.get_extra_info("peername")
        conn = h11.Connection(h11.SERVER, max_incomplete_event_size=self.limits.max_head_bytes)
        stream: Stream = _PlainStream(reader, writer)
        try:
            # The TLS handshake and the first request head share one deadline.
            deadline = self._loop.time() + self.limits.header_timeout
            context = self._tls()
            if context is not None:
                stream = TlsStream(reader, writer, context)
                async with asyncio.timeout_at(deadline):
                    await stream.hello()
                    self._start_handshake(writer)
                    try:
                        await stream.negotiate()
                    finally:
                        self._handshaking.pop(writer, None)
            while True:
                state.idle_since = time.monotonic()
                try:
                    async with asyncio.timeout_at(deadline):  # the whole head, not each read
                        event = await self._next_request(conn, stream)
                except h11.RemoteProtocolError as error:
                    await self._refuse(conn, stream, BadRequest(error.error_status_hint,
                                                                str(error)))
                    break
                if event is None:
                    break  # the client closed between requests
                state.idle_since = None
                if not await self._respond(conn, _request(event), stream, peer):
                    break
                conn.start_next_cycle()
                deadline = self._loop.time() + self.limits.idle_timeout
        except (asyncio.IncompleteReadError, OSError) as error:  # timeouts, resets, TLS
            log.debug("connection from %s ended: %s", peer, error or type(error).__name__)
        finally:
            self._connections.pop(writer, None)
            stream.close()
            writer.close()

    async def _next_request(self, conn: h11.Connection,
                            reader: Stream) -> h11.Request | None:
        """The next request head (None: closed cleanly); RemoteProtocolError if unreadable."""
        limit = self.limits.max_head_bytes
        received = len(conn.trailing_data[0])  # pipelined bytes already held count too
        while True:
            event = conn.next_event()
            if isinstance(event, h11.Request):
                if received - len(conn.trailing_data[0]) > limit:
                    raise h11.RemoteProtocolError("request head too large", 431)
                return event
            if isinstance(event, h11.ConnectionClosed):
                return None
            if event is not h11.NEED_DATA:  # body data after a head: refused before this
                raise h11.RemoteProtocolError("unexpected request data", 400)
            # An unfinished head past the limit: h11 raises (431) at the next next_event().
            data = await reader.read(limit)
            received += len(data)
            conn.receive_data(data)  # b"": the client closed

    async def _respond(self, conn: h11.Connection, request: Request, writer: Stream,
                       peer: object) -> bool:
        """Answers one request; False if the connection is to close."""
        refusal = _refusal(request)
        if refusal is not None:
            await self._refuse(conn, writer, refusal)
            return False
        try:
            response = await self._sorted(request)
            if response is None:
                response = await self._loop.run_in_executor(self._workers, self._handler,
                                                            request)
        except Exception:
            log.exception("%s: %s %s failed", self._name, request.method, request.target)
            response = Response(500, b"internal error\n", close=True)
        self.requests += 1
        await self._write(writer, _serialize(conn, response, head_only=request.method == "HEAD",
                                             extra=self._headers()))
        log.debug("%s %s %s -> %d", peer, request.method, request.target, response.status)
        # The request's end (it has no body: refused above), then h11's keep-alive verdict
        # (HTTP/1.0, ``Connection: close`` either way: MUST_CLOSE).
        ended = isinstance(conn.next_event(), h11.EndOfMessage)
        return ended and conn.our_state is h11.DONE and conn.their_state is h11.DONE

    async def _sorted(self, request: Request) -> Response | None:
        """The answer triage and check give (None: on to the handler)."""
        verdict = self._triage(request) if self._triage is not None else True
        if isinstance(verdict, Response):
            return verdict
        if verdict or self._check is None:
            return None
        if self._checks >= self.limits.max_checks:
            self.throttled += 1
            return Response(429, b"too many credential checks at once; retry later\n",
                            headers=(("Retry-After", "1"),))
        self._checks += 1
        try:
            return await self._loop.run_in_executor(self._checker, self._check, request)
        finally:
            self._checks -= 1

    async def _refuse(self, conn: h11.Connection, writer: Stream,
                      refusal: BadRequest) -> None:
        error = self._error(refusal.status, str(refusal))
        response = Response(error.status, error.body, error.content_type,
                            (*refusal.headers, *error.headers), close=True)
        with contextlib.suppress(OSError, h11.LocalProtocolError):  # it closes either way
            await self._write(writer, _serialize(conn, response, head_only=False,
                                                 extra=self._headers()))

    async def _write(self, writer: Stream, data: bytes) -> None:
        writer.write(data)
        await asyncio.wait_for(writer.drain(), self.limits.write_timeout)
