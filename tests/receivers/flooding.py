"""Collectors that answer too much: an OTLP/HTTP one whose 200 carries a body of any size
(streamed, never held), and a grpcio one whose answer carries a huge partial-success message
(issue 39, item 7). Each counts the exports it was sent."""

from __future__ import annotations

import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

import grpc
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)

_CHUNK = b"\0" * (1 << 20)


class HttpFlood:
    """``POST /v1/*`` answered 200 with ``body_bytes`` bytes (Content-Length given)."""

    def __init__(self, body_bytes: int) -> None:
        self.body_bytes = body_bytes
        self.requests = 0
        self._lock = threading.Lock()
        flood = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with flood._lock:
                    flood.requests += 1
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(flood.body_bytes))
                self.end_headers()
                left = flood.body_bytes
                try:
                    while left > 0:
                        piece = _CHUNK[:min(left, len(_CHUNK))]
                        self.wfile.write(piece)
                        left -= len(piece)
                except OSError:
                    return  # the agent stopped reading: what it should do

            def log_message(self, format: str, *args: Any) -> None:
                return None

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> HttpFlood:
        self._thread.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._server.shutdown()
        self._server.server_close()


class GrpcFlood:
    """OTLP/gRPC metrics and logs answered OK with a partial-success message of
    ``message_bytes`` characters (a collector may explain a partial success at length)."""

    def __init__(self, message_bytes: int) -> None:
        self.requests = 0
        self._lock = threading.Lock()
        text = "x" * message_bytes
        flood = self

        class Metrics(metrics_service_pb2_grpc.MetricsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
                with flood._lock:
                    flood.requests += 1
                response = metrics_service_pb2.ExportMetricsServiceResponse()
                response.partial_success.error_message = text
                return response

        class Logs(logs_service_pb2_grpc.LogsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:  # noqa: N802
                response = logs_service_pb2.ExportLogsServiceResponse()
                response.partial_success.error_message = text
                return response

        self._server = grpc.server(futures.ThreadPoolExecutor(max_workers=4),
                                   options=[("grpc.so_reuseport", 0),
                                            ("grpc.max_send_message_length", -1)])
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(Metrics(), self._server)
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), self._server)
        self._port = self._server.add_insecure_port("127.0.0.1:0")

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    def __enter__(self) -> GrpcFlood:
        self._server.start()
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        self._server.stop(None).wait(5)
