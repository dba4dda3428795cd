"""OTLP/HTTP (binary protobuf): an encoded request POSTed with the standard library.

``http.client`` and ``ssl`` are enough for one POST to one URL over a kept-alive connection:
after its first send this costs about 2 MiB of resident memory where the SDK's HTTP exporter
(``requests``, urllib3 and its transport package) cost about 7 MiB, and no CPU more per
export. What that exporter does is reproduced after the OTLP specification: the CA bundle
and client certificate for TLS, headers, gzip or deflate bodies, a timeout on the socket
equal to what is left of the deadline (and a timer that cuts the connection at the deadline,
since the socket timeout bounds each read, not a slowly trickled answer), and retries with
back-off on 429, 502, 503 and 504 honouring ``Retry-After`` (on the collector's gate, so the
delay holds every sender to it: ``throttle``). A kept-alive connection the
collector closed meanwhile is retried once at once, as the SDK does.
"""

from __future__ import annotations

import contextlib
import gzip
import http.client
import logging
import socket
import ssl
import threading
import time
import zlib
from email.utils import parsedate_to_datetime
from urllib.parse import urlsplit

from google.protobuf.message import Message

from gpu_otel_agent.export.otlp.failure_log import FailureLog
from gpu_otel_agent.export.otlp.failure_words import http_error_words, http_status_words
from gpu_otel_agent.export.otlp.retry import Attempt, budget, with_retries
from gpu_otel_agent.export.otlp.target import ExporterConfigError, OtlpTarget
from gpu_otel_agent.export.otlp.throttle import gate_for
from gpu_otel_agent.version import USER_AGENT

log = logging.getLogger(__name__)

RETRYABLE = frozenset({429, 502, 503, 504})
# Final answers about the body (malformed, too large, not processable): sent again, refused
# again; other 4xx (401, 403, 404) are about the agent's settings and wait for the operator.
BAD_CONTENT = frozenset({400, 413, 422})
MAX_ANSWER_BYTES = 64 * 1024  # the most of an answer's body read (see ``_post``)


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a Retry-After header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        return max(parsedate_to_datetime(value).timestamp() - time.time(), 0.0)
    except (TypeError, ValueError):
        return None


def ssl_context(target: OtlpTarget) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=target.certificate)
    if target.client_certificate:
        context.load_cert_chain(target.client_certificate, target.client_key)
    return context


class HttpTransport:
    def __init__(self, target: OtlpTarget) -> None:
        url = urlsplit(target.endpoint)
        if url.scheme not in ("http", "https") or not url.hostname:
            raise ExporterConfigError(
                f"OTLP/HTTP endpoint {target.endpoint!r} is not an http:// or https:// URL")
        self._target = target
        self._failures = FailureLog(f"OTLP/HTTP {target.signal.lower()} export",
                                    target.endpoint)
        self._https = url.scheme == "https"
        self._host = url.hostname
        self._port = url.port
        self._path = (url.path or "/") + (f"?{url.query}" if url.query else "")
        self._context = ssl_context(target) if self._https else None
        headers = {"content-type": "application/x-protobuf", "user-agent": USER_AGENT}
        if target.compression is not None:
            headers["content-encoding"] = target.compression
        headers.update(target.headers)
        self._headers = headers
        self._connection: http.client.HTTPConnection | None = None
        self._stop = threading.Event()
        self._gate = gate_for(f"{self._host}:{self._port or (443 if self._https else 80)}")

    @property
    def target(self) -> OtlpTarget:
        return self._target

    def _body(self, request: Message | bytes | bytearray) -> bytes | bytearray:
        # A bytearray (the metric encoder's request buffer) is posted as it is: http.client
        # sends any buffer, and its Content-Length is the buffer's size.
        data = (request if isinstance(request, bytes | bytearray)
                else request.SerializeToString())
        if self._target.compression == "gzip":
            return gzip.compress(data, compresslevel=6)
        if self._target.compression == "deflate":
            return zlib.compress(data)
        return data

    def send(self, request: Message | bytes | bytearray,
             timeout_s: float | None = None) -> Attempt:
        """See :class:`~gpu_otel_agent.export.otlp.senders.RequestSender`."""
        body = self._body(request)
        return with_retries(lambda remaining: self._attempt(body, remaining),
                            budget(self._target, timeout_s), self._stop, self._gate)

    def _connect(self, timeout_s: float) -> http.client.HTTPConnection:
        if self._https:
            return http.client.HTTPSConnection(self._host, self._port, timeout=timeout_s,
                                               context=self._context)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout_s)

    def _post(self, body: bytes | bytearray, timeout_s: float) -> tuple[int, str | None]:
        connection = self._connection
        if connection is None:
            connection = self._connection = self._connect(timeout_s)
        else:
            connection.timeout = timeout_s  # applies when it (re)connects
            if connection.sock is not None:
                connection.sock.settimeout(timeout_s)
        try:
            connection.request("POST", self._path, body=body, headers=self._headers)
            response = connection.getresponse()
            # The body is not used (a partial success is informational): read whole only
            # when small, so the connection can be used again; a larger one is left unread
            # and the connection closed (a 256 MiB answer was read whole: 304 MiB resident).
            length = response.getheader("content-length") or ""
            unread = length.isdigit() and int(length) > MAX_ANSWER_BYTES
            if not unread:
                response.read(MAX_ANSWER_BYTES + 1)
                unread = not response.isclosed()  # more than that (chunked, no length)
        except BaseException:
            self._close()
            raise
        if response.will_close or unread:
            self._close()
        return response.status, response.getheader("retry-after")

    def _attempt(self, body: bytes | bytearray, remaining_s: float) -> Attempt:
        deadline = time.monotonic() + remaining_s
        reused = self._connection is not None
        watchdog = threading.Timer(remaining_s, self._cut)
        watchdog.daemon = True
        watchdog.start()
        try:
            return self._attempt_until(body, deadline, reused)
        finally:
            watchdog.cancel()

    def _cut(self) -> None:
        """At the deadline: end the exchange in progress (its read then fails at once)."""
        connection = self._connection
        sock = connection.sock if connection is not None else None
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def _attempt_until(self, body: bytes | bytearray, deadline: float,
                       reused: bool) -> Attempt:
        remaining_s = deadline - time.monotonic()
        try:
            try:
                status, retry_after = self._post(body, remaining_s)
            except (ConnectionError, http.client.RemoteDisconnected, http.client.BadStatusLine):
                left = deadline - time.monotonic()
                if not reused or left <= 0:
                    raise
                # A kept-alive connection the collector had closed: once more, at once.
                status, retry_after = self._post(body, left)
        except (OSError, http.client.HTTPException) as error:
            log.debug("OTLP/HTTP export to %s: %s", self._target.endpoint, error)
            words = http_error_words(self._target, error, remaining_s)
            if words is not None:
                self._failures.failed(*words)
            # A timeout ends this export (the next interval has fresher values); a certificate
            # problem does not go away by retrying.
            return Attempt(ok=False, retryable=not isinstance(error, TimeoutError | ssl.SSLError))
        if 200 <= status < 300:
            self._failures.succeeded()
            return Attempt(ok=True)
        retryable = status in RETRYABLE
        words = http_status_words(self._target, status)
        if words is not None:
            self._failures.failed(*words)
        return Attempt(ok=False, retryable=retryable, delay_s=_retry_after(retry_after),
                       code=f"HTTP {status}",
                       bad_content=not retryable and status in BAD_CONTENT)

    def _close(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    def shutdown(self) -> None:
        self._stop.set()
        self._close()
