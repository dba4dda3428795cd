"""An OTLP/HTTP receiver (protobuf and JSON) on http.server in a background thread.

Same store and reject/stop/restart semantics as the gRPC receiver, so a test
can be parametrised over transports. Rejection answers 503 (optionally with
Retry-After), the status the OTLP spec marks retryable.
"""

from __future__ import annotations

import contextlib
import gzip
import socket
import threading
import time
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, cast

from google.protobuf import json_format
from google.protobuf.message import Message
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import (
    ExportLogsServiceRequest,
    ExportLogsServiceResponse,
)
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

from tests.receivers.records import Received, Signal
from tests.receivers.store import Store

_ROUTES: dict[str, tuple[Signal, type[Message], type[Message]]] = {
    "/v1/metrics": ("metrics", ExportMetricsServiceRequest, ExportMetricsServiceResponse),
    "/v1/logs": ("logs", ExportLogsServiceRequest, ExportLogsServiceResponse),
    "/v1/traces": ("traces", ExportTraceServiceRequest, ExportTraceServiceResponse),
}


def _decompress(body: bytes, encoding: str | None) -> bytes:
    if encoding in (None, "", "identity"):
        return body
    if encoding == "gzip":
        return gzip.decompress(body)
    if encoding == "deflate":
        return zlib.decompress(body)
    raise ValueError(f"unsupported Content-Encoding {encoding!r}")


class _Server(ThreadingHTTPServer):
    """Holds the receiver state handlers need and tracks live sockets so stop() can cut them."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], receiver: OtlpHttpReceiver) -> None:
        self.receiver = receiver
        self.live: set[socket.socket] = set()
        self.live_lock = threading.Lock()
        super().__init__(address, _Handler)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.live_lock:
            self.live.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self.live_lock:
            self.live.discard(request)
        super().shutdown_request(request)

    def cut_connections(self) -> None:
        with self.live_lock:
            sockets = list(self.live)
            self.live.clear()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, like real collectors

    def log_message(self, format: str, *args: object) -> None:
        """Silence per-request stderr noise; the store is the record."""

    def do_POST(self) -> None:
        receiver = cast(_Server, self.server).receiver
        route = _ROUTES.get(self.path.split("?", 1)[0])
        body = self._read_body()
        if route is None:
            self._reply(404, b"unknown OTLP path", "text/plain")
            return
        signal, request_type, response_type = route
        encoding = (self.headers.get("Content-Encoding") or "").strip().lower() or None
        content_type = (self.headers.get("Content-Type") or "").split(";", 1)[0].strip()
        is_json = content_type == "application/json"
        try:
            raw = _decompress(body, encoding)
            request = request_type()
            if is_json:
                json_format.Parse(raw.decode("utf-8"), request)
            else:
                request.ParseFromString(raw)
        except Exception as error:  # the point is to report, not crash the thread
            self._reply(400, f"cannot decode request: {error}".encode(), "text/plain")
            return
        rejecting, retry_after = receiver.rejection()
        refusal = (receiver.status_for(signal, request)
                   if receiver.status_for is not None and not rejecting else None)
        receiver.store.add(
            Received(
                signal=signal,
                transport="http",
                request=request,
                received_at=time.time(),
                metadata={k.lower(): v for k, v in self.headers.items()},
                compression=encoding,
                accepted=not rejecting and refusal is None,
            )
        )
        if refusal is not None:
            self._reply(refusal, b"test receiver refuses this export", "text/plain")
        elif rejecting:
            extra = {} if retry_after is None else {"Retry-After": str(retry_after)}
            self._reply(503, b"test receiver is rejecting exports", "text/plain", extra)
        elif is_json:
            self._reply(200, json_format.MessageToJson(response_type()).encode(), content_type)
        else:
            self._reply(200, response_type().SerializeToString(), "application/x-protobuf")

    def _read_body(self) -> bytes:
        if (self.headers.get("Transfer-Encoding") or "").lower() == "chunked":
            chunks: list[bytes] = []
            while size := int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16):
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _reply(
        self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for key, value in (extra or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body)


class OtlpHttpReceiver:
    """OTLP/HTTP receiver; ``endpoint`` is the base URL, ``url(signal)`` the full export URL."""

    def __init__(
        self, store: Store | None = None, *, host: str = "127.0.0.1", port: int = 0
    ) -> None:
        self.store = store if store is not None else Store("otlp-http")
        self.host = host
        self.port = port
        self._lock = threading.Lock()
        self._reject: tuple[bool, int | None] = (False, None)
        # Decides per request: an HTTP status to refuse it with (400 ...), or None.
        self.status_for: Callable[[Signal, Message], int | None] | None = None
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def endpoint(self) -> str:
        """Base URL, as OTEL_EXPORTER_OTLP_ENDPOINT takes it (the SDK appends /v1/<signal>)."""
        return f"http://{self.host}:{self.port}"

    def url(self, signal: Signal) -> str:
        """Full per-signal URL, as the SDK's ``endpoint=`` argument expects."""
        return f"{self.endpoint}/v1/{signal}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def reject(self, retry_after: int | None = None) -> None:
        """Answer 503 to every export (requests are still recorded as rejected)."""
        with self._lock:
            self._reject = (True, retry_after)

    def accept(self) -> None:
        with self._lock:
            self._reject = (False, None)

    def rejection(self) -> tuple[bool, int | None]:
        with self._lock:
            return self._reject

    def start(self) -> OtlpHttpReceiver:
        """Serve in a daemon thread; reuses the same port after ``stop()``."""
        if self._server is not None:
            return self
        server = _Server((self.host, self.port), self)
        self.port = int(server.server_address[1])
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever,
            kwargs={"poll_interval": 0.05},
            name=f"otlp-http-{self.port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Close the listener and live keep-alive connections, like a dead collector."""
        server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        server.cut_connections()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> OtlpHttpReceiver:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
