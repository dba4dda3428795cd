"""A real OTLP/gRPC receiver built from opentelemetry-proto's service stubs.

Clients connect to a ``SniffingProxy`` port that survives restarts; behind it
runs a grpcio server with the Metrics, Logs and Trace services. Rejection
(UNAVAILABLE by default) simulates a collector that is up but refusing data;
``stop()`` simulates one that is gone.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc
from google.protobuf.any_pb2 import Any as AnyMessage
from google.protobuf.duration_pb2 import Duration
from google.protobuf.message import Message
from google.rpc.error_details_pb2 import RetryInfo
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
from opentelemetry.proto.collector.metrics.v1 import (
    metrics_service_pb2,
    metrics_service_pb2_grpc,
)
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from tests.receivers.records import Received, Signal
from tests.receivers.sniffing_proxy import SniffingProxy
from tests.receivers.store import Store


@dataclass(frozen=True)
class Answer:
    """A refusal: the status, its message and trailing metadata (``-bin`` keys: bytes)."""

    code: grpc.StatusCode
    details: str = "test receiver refuses this export"
    trailing: tuple[tuple[str, str | bytes], ...] = ()


class _Status(grpc.Status):
    def __init__(self, answer: Answer) -> None:
        self.code = answer.code
        self.details = answer.details
        self.trailing_metadata = answer.trailing


def retry_info(delay_s: float) -> RetryInfo:
    seconds = int(delay_s)
    return RetryInfo(retry_delay=Duration(seconds=seconds,
                                          nanos=int((delay_s - seconds) * 1e9)))


def throttled(delay_s: float, code: grpc.StatusCode = grpc.StatusCode.RESOURCE_EXHAUSTED,
              *, legacy: bool = False) -> Answer:
    """``code`` with a RetryInfo of ``delay_s``: in the google.rpc.Status details of
    ``grpc-status-details-bin`` (where grpc servers put it), or, ``legacy``, alone in the
    older ``google.rpc.retryinfo-bin`` trailer."""
    info = retry_info(delay_s)
    if legacy:
        return Answer(code, "slow down", (("google.rpc.retryinfo-bin",
                                           info.SerializeToString()),))
    detail = AnyMessage()
    detail.Pack(info)
    status = Status(code=code.value[0], message="slow down", details=[detail])
    return Answer(code, "slow down", (("grpc-status-details-bin",
                                       status.SerializeToString()),))


# Decides per request: None accepts it, an Answer refuses it.
Rule = Callable[[Signal, Message], Answer | None]


class _Rejection:
    """Current reject setting, read by every handler thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._code: grpc.StatusCode | None = None
        self._rule: Rule | None = None

    def set(self, code: grpc.StatusCode | None) -> None:
        with self._lock:
            self._code = code

    def set_rule(self, rule: Rule | None) -> None:
        with self._lock:
            self._rule = rule

    def get(self) -> grpc.StatusCode | None:
        with self._lock:
            return self._code

    def answer(self, signal: Signal, request: Message) -> Answer | None:
        with self._lock:
            code, rule = self._code, self._rule
        if code is not None:
            return Answer(code, "test receiver is rejecting exports (simulated outage)")
        return rule(signal, request) if rule is not None else None


class _Handler:
    """Shared Export logic: record the request, then answer or abort."""

    def __init__(
        self, signal: Signal, store: Store, rejection: _Rejection, proxy: SniffingProxy
    ) -> None:
        self._signal: Signal = signal
        self._store = store
        self._rejection = rejection
        self._proxy = proxy

    def handle(self, request: Message, context: Any, response: Message) -> Message:
        metadata = {str(k).lower(): str(v) for k, v in context.invocation_metadata()}
        answer = self._rejection.answer(self._signal, request)
        self._store.add(
            Received(
                signal=self._signal,
                transport="grpc",
                request=request,
                received_at=time.time(),
                metadata=metadata,
                compression=self._compression(context),
                accepted=answer is None,
            )
        )
        if answer is not None:
            context.abort_with_status(_Status(answer))
        return response

    def _compression(self, context: Any) -> str | None:
        peer = str(context.peer())  # e.g. "ipv4:127.0.0.1:54321" = the proxy's upstream socket
        try:
            port = int(peer.rsplit(":", 1)[1])
        except (IndexError, ValueError):
            return None
        _, compression = self._proxy.compression_for(port)
        return compression


class _MetricsService(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, handler: _Handler) -> None:
        self._handler = handler

    def Export(self, request: Message, context: Any) -> Message:  # noqa: N802 - gRPC name
        return self._handler.handle(
            request, context, metrics_service_pb2.ExportMetricsServiceResponse()
        )


class _LogsService(logs_service_pb2_grpc.LogsServiceServicer):
    def __init__(self, handler: _Handler) -> None:
        self._handler = handler

    def Export(self, request: Message, context: Any) -> Message:  # noqa: N802 - gRPC name
        return self._handler.handle(request, context, logs_service_pb2.ExportLogsServiceResponse())


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, handler: _Handler) -> None:
        self._handler = handler

    def Export(self, request: Message, context: Any) -> Message:  # noqa: N802 - gRPC name
        return self._handler.handle(
            request, context, trace_service_pb2.ExportTraceServiceResponse()
        )


# (signal, add_*Servicer_to_server, servicer class); the stub registrars are untyped.
_SERVICES: tuple[tuple[Signal, Callable[[Any, Any], None], Callable[[_Handler], object]], ...] = (
    ("metrics", metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server, _MetricsService),
    ("logs", logs_service_pb2_grpc.add_LogsServiceServicer_to_server, _LogsService),
    ("traces", trace_service_pb2_grpc.add_TraceServiceServicer_to_server, _TraceService),
)


class OtlpGrpcReceiver:
    """OTLP/gRPC receiver on 127.0.0.1 with an OS-chosen port that stays fixed across restarts.

    ``endpoint`` ("http://127.0.0.1:PORT") is what OTEL_EXPORTER_OTLP_ENDPOINT
    takes; the scheme tells the SDK to use an insecure channel.
    """

    def __init__(
        self,
        store: Store | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        tls: tuple[bytes, bytes] | None = None,
    ) -> None:
        self.store = store if store is not None else Store("otlp-grpc")
        self._tls = tls  # (certificate chain PEM, private key PEM): serve TLS instead
        self._proxy = SniffingProxy(host, port)
        self._rejection = _Rejection()
        self._server: grpc.Server | None = None

    @property
    def host(self) -> str:
        return self._proxy.host

    @property
    def port(self) -> int:
        return self._proxy.port

    @property
    def address(self) -> str:
        """``host:port`` without a scheme, for clients that want a bare target."""
        return f"{self.host}:{self.port}"

    @property
    def endpoint(self) -> str:
        return f"{'https' if self._tls else 'http'}://{self.address}"

    @property
    def running(self) -> bool:
        return self._server is not None

    def reject(self, code: grpc.StatusCode | None = grpc.StatusCode.UNAVAILABLE) -> None:
        """Answer every export with ``code`` (None = accept again); requests are still recorded."""
        self._rejection.set(code)

    def answer_with(self, rule: Rule | None) -> None:
        """Decide each export with ``rule`` (a refusal of one record, a throttle ...); None
        goes back to accepting. ``reject`` still overrides it while set."""
        self._rejection.set_rule(rule)

    def accept(self) -> None:
        """Stop rejecting."""
        self._rejection.set(None)

    def start(self) -> OtlpGrpcReceiver:
        """Start serving; reuses the same public port after a ``stop()``."""
        if self._server is not None:
            return self
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="otlp-grpc"),
            options=[("grpc.so_reuseport", 0)],
        )
        for signal, register, service in _SERVICES:
            register(service(_Handler(signal, self.store, self._rejection, self._proxy)), server)
        if self._tls is None:
            internal_port = int(server.add_insecure_port("127.0.0.1:0"))
        else:
            key_pair = [(self._tls[1], self._tls[0])]
            credentials = grpc.ssl_server_credentials(key_pair)
            internal_port = int(server.add_secure_port("127.0.0.1:0", credentials))
        server.start()
        self._server = server
        try:
            self._proxy.start(("127.0.0.1", internal_port))
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self, grace: float | None = None) -> None:
        """Refuse new connections and drop live ones; the port is kept for ``start()``."""
        self._proxy.stop()
        if self._server is not None:
            self._server.stop(grace).wait(5)
            self._server = None

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> OtlpGrpcReceiver:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
