"""A small HTTP/1.1 server for the endpoint: bounded threads, bounded connections, timeouts.

One event loop, on a thread of its own, owns every socket: accepting, TLS handshakes, reading
request heads, writing responses. An idle or slow client therefore costs a few kilobytes and
no thread (``http.server`` gave each connection a thread blocked in ``readline``, with a listen
backlog of 5). Building a response — authorisation (bcrypt is slow on purpose), encoding a
scrape, gzip — runs in a fixed pool of ``Limits.workers`` threads, so the agent's thread count
does not grow with its clients and the loop never waits on CPU work.

Limits, and what happens at them:

- ``max_connections`` open at once: one more evicts the connection idle the longest (waiting
  for a request); if every connection is busy, the new one is closed. A flood of idle sockets
  thus cannot lock Prometheus out.
- ``header_timeout``: a new connection must finish its TLS handshake and send a complete
  request head within it (slowloris); ``idle_timeout`` is the same for the next request on a
  kept-alive connection (longer than the usual 15-60 s scrape interval, so Prometheus keeps
  its connection). ``write_timeout`` bounds sending a response to a client that does not read.
- A request head larger than ``max_head_bytes`` is answered 431; a request with a body, 400;
  a method other than GET or HEAD, 405. Each of those closes the connection.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import email.utils
import logging
import socket
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from gpu_otel_agent.threads.named import NamedThread, name_pool_thread

log = logging.getLogger(__name__)
REASONS = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
           405: "Method Not Allowed", 431: "Request Header Fields Too Large",
           500: "Internal Server Error", 503: "Service Unavailable",
           505: "HTTP Version Not Supported"}


@dataclass(frozen=True)
class Limits:
    max_connections: int = 512
    workers: int = 2
    header_timeout: float = 10.0
    idle_timeout: float = 75.0
    write_timeout: float = 30.0
    max_head_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        for name in ("max_connections", "workers", "max_head_bytes"):
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


class BadRequest(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def parse_head(head: bytes) -> Request:
    """A request line and header fields, CRLF-separated, ending in an empty line."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[0] or not parts[1]:
        raise BadRequest(400, "malformed request line")
    method, target, version = parts
    if version not in ("HTTP/1.1", "HTTP/1.0"):
        raise BadRequest(505 if version.startswith("HTTP/") else 400, "unsupported version")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip() or line[0] in " \t":
            raise BadRequest(400, "malformed header field")
        key = name.lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    return Request(method, target, version, headers)


def _wants_close(request: Request) -> bool:
    tokens = {t.strip().lower() for t in (request.header("connection") or "").split(",")}
    return request.version == "HTTP/1.0" or "close" in tokens


def _has_body(request: Request) -> bool:
    length = request.header("content-length")
    return request.header("transfer-encoding") is not None or (
        length is not None and length.strip() != "0")


def serialize(response: Response, *, head_only: bool, close: bool,
              extra: Mapping[str, str]) -> bytes:
    reason = REASONS.get(response.status, "")
    lines = [f"HTTP/1.1 {response.status} {reason}",
             f"Date: {email.utils.formatdate(usegmt=True)}",
             f"Content-Type: {response.content_type}",
             f"Content-Length: {len(response.body)}"]
    lines += [f"{name}: {value}" for name, value in {**extra, **dict(response.headers)}.items()]
    if close:
        lines.append("Connection: close")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    return head if head_only else head + response.body


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
                 headers: Callable[[], Mapping[str, str]], limits: Limits) -> None:
        self._sock = sock
        self._handler = handler
        self._tls = tls
        self._headers = headers
        self.limits = limits
        self._loop = asyncio.new_event_loop()
        self._workers = concurrent.futures.ThreadPoolExecutor(
            limits.workers, thread_name_prefix="prometheus-worker",
            initializer=name_pool_thread)
        self._connections: dict[asyncio.StreamWriter, _Connection] = {}
        self._server: asyncio.Server | None = None
        self._thread: threading.Thread | None = None
        self.evicted = 0
        self.refused = 0

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._sock.getsockname()[:2]
        return str(host), int(port)

    @property
    def open_connections(self) -> int:
        return len(self._connections)

    def start(self) -> None:
        ready: concurrent.futures.Future[None] = concurrent.futures.Future()
        self._thread = NamedThread(target=self._run, args=(ready,), name="prometheus-http",
                                        daemon=True)
        self._thread.start()
        ready.result()

    def _run(self, ready: concurrent.futures.Future[None]) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._server = self._loop.run_until_complete(asyncio.start_server(
                self._serve, sock=self._sock, limit=self.limits.max_head_bytes,
                backlog=socket.SOMAXCONN))
        except BaseException as error:
            ready.set_exception(error)
            return
        ready.set_result(None)
        try:
            self._loop.run_forever()
        finally:
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

    def stop(self) -> None:
        if self._thread is None:
            return
        future = asyncio.run_coroutine_threadsafe(self._close(), self._loop)
        try:
            future.result(timeout=5)
        except (concurrent.futures.TimeoutError, RuntimeError) as error:
            log.warning("prometheus endpoint did not stop cleanly: %s", error)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)
        self._workers.shutdown(wait=False, cancel_futures=True)
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

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if not self._admit(writer):
            writer.transport.abort()
            return
        state = _Connection(writer)
        self._connections[writer] = state
        peer = writer.get_extra_info("peername")
        try:
            context = self._tls()
            if context is not None:
                await writer.start_tls(context, ssl_handshake_timeout=self.limits.header_timeout)
            timeout = self.limits.header_timeout
            while True:
                state.idle_since = time.monotonic()
                try:
                    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
                except (asyncio.LimitOverrunError, ValueError):  # ValueError: limit, mid-buffer
                    # Only the head read: a ValueError from answering is a bug, not a 431.
                    await self._reply_error(writer, 431, "request head too large")
                    break
                state.idle_since = None
                if not await self._respond(head, writer):
                    break
                timeout = self.limits.idle_timeout
        except (asyncio.IncompleteReadError, OSError) as error:  # timeouts, resets, TLS
            log.debug("connection from %s ended: %s", peer, error or type(error).__name__)
        finally:
            self._connections.pop(writer, None)
            writer.close()

    async def _respond(self, head: bytes, writer: asyncio.StreamWriter) -> bool:
        """Answers one request; False if the connection is to close."""
        try:
            request = parse_head(head)
        except BadRequest as error:
            await self._reply_error(writer, error.status, str(error))
            return False
        if request.method not in ("GET", "HEAD"):
            await self._reply_error(writer, 405, "only GET and HEAD", (("Allow", "GET, HEAD"),))
            return False
        if _has_body(request):
            await self._reply_error(writer, 400, "a request body is not expected")
            return False
        try:
            response = await self._loop.run_in_executor(self._workers, self._handler, request)
        except Exception:
            log.exception("prometheus endpoint: %s %s failed", request.method, request.target)
            response = Response(500, b"internal error\n", close=True)
        close = response.close or _wants_close(request)
        await self._write(writer, serialize(response, head_only=request.method == "HEAD",
                                            close=close, extra=self._headers()))
        log.debug("%s %s %s -> %d", writer.get_extra_info("peername"), request.method,
                  request.target, response.status)
        return not close

    async def _reply_error(self, writer: asyncio.StreamWriter, status: int, message: str,
                           headers: tuple[tuple[str, str], ...] = ()) -> None:
        response = Response(status, (message + "\n").encode(), headers=headers, close=True)
        with contextlib.suppress(OSError):  # the connection closes either way
            await self._write(writer, serialize(response, head_only=False, close=True,
                                                extra=self._headers()))

    async def _write(self, writer: asyncio.StreamWriter, data: bytes) -> None:
        writer.write(data)
        await asyncio.wait_for(writer.drain(), self.limits.write_timeout)
