"""OTLP/gRPC: an encoded request sent through opentelemetry-proto's generated service stub.

Public APIs only: ``grpc`` channels and ``*_service_pb2_grpc`` stubs, the same pair the SDK's
exporter uses underneath. What the SDK exporter added on top is reproduced here, following the
OTLP specification: TLS with the configured CA and client certificate, headers as call
metadata, gzip, a deadline on every call, and retries with back-off on the retryable status
codes (honouring the collector's ``RetryInfo``). After UNAVAILABLE the channel is rebuilt, as
the SDK does: a channel left in gRPC's reconnect back-off would fail fast for a minute or more
after the collector came back.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError, Message
from google.rpc.error_details_pb2 import RetryInfo

from gpu_otel_agent.export.otlp_target import OtlpTarget
from gpu_otel_agent.export.retry import Attempt, with_retries
from gpu_otel_agent.version import USER_AGENT

log = logging.getLogger(__name__)

# https://opentelemetry.io/docs/specs/otlp/#failures : these may succeed when tried again.
RETRYABLE = frozenset({
    grpc.StatusCode.CANCELLED,
    grpc.StatusCode.DEADLINE_EXCEEDED,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.OUT_OF_RANGE,
    grpc.StatusCode.UNAVAILABLE,
    grpc.StatusCode.DATA_LOSS,
})
_RETRY_INFO_KEY = "google.rpc.retryinfo-bin"


def _read(path: str | None) -> bytes | None:
    if path is None:
        return None
    with open(path, "rb") as pem:
        return pem.read()


def channel_credentials(target: OtlpTarget) -> grpc.ChannelCredentials:
    # Read now, not per call: a missing file is a configuration error at start-up.
    return grpc.ssl_channel_credentials(
        root_certificates=_read(target.certificate),
        private_key=_read(target.client_key),
        certificate_chain=_read(target.client_certificate),
    )


def _retry_delay(error: grpc.RpcError) -> float | None:
    """The delay the collector asked for; None (our own back-off) when it named none we can
    read. The trailer is the collector's input: a garbled one must not escape ``send``."""
    trailing: Any = error.trailing_metadata() if hasattr(error, "trailing_metadata") else None
    for key, value in trailing or ():
        if key == _RETRY_INFO_KEY:
            try:
                delay = RetryInfo.FromString(value).retry_delay
            except DecodeError:
                log.debug("OTLP/gRPC: unreadable %s trailer ignored", _RETRY_INFO_KEY)
                return None
            return max(float(delay.seconds) + float(delay.nanos) / 1e9, 0.0)
    return None


class GrpcTransport:
    """Sends requests of one signal; ``stub`` is e.g. ``MetricsServiceStub``."""

    def __init__(self, target: OtlpTarget, stub: Callable[[grpc.Channel], Any],
                 method: str | None = None) -> None:
        """``method`` (``/package.Service/Export``) lets ``send`` take already serialised
        requests: they go out as they are, through a callable without a serialiser."""
        self._target = target
        self._stub_type = stub
        self._method = method
        self._credentials = channel_credentials(target) if target.tls else None
        self._compression = (grpc.Compression.Gzip if target.compression == "gzip"
                             else grpc.Compression.NoCompression)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._channel, self._export, self._raw = self._connect()

    @property
    def target(self) -> OtlpTarget:
        return self._target

    def _connect(self) -> tuple[grpc.Channel, Callable[..., Any], Callable[..., Any] | None]:
        options = [("grpc.primary_user_agent", USER_AGENT)]
        if self._credentials is None:
            channel = grpc.insecure_channel(self._target.endpoint, options=options,
                                            compression=self._compression)
        else:
            channel = grpc.secure_channel(self._target.endpoint, self._credentials,
                                          options=options, compression=self._compression)
        # Without serialiser or deserialiser gRPC takes and returns bytes (the answer, an
        # Export...ServiceResponse, is not read either way).
        raw = (channel.unary_unary(self._method) if self._method is not None else None)
        return channel, self._stub_type(channel).Export, raw

    def _reconnect(self) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            old = self._channel
            self._channel, self._export, self._raw = self._connect()
        old.close()

    def send(self, request: Message | bytes, timeout_s: float | None = None) -> bool:
        """True when the collector accepted ``request``; bounded by the configured timeout
        and by ``timeout_s`` when the caller has a shorter deadline of its own."""
        budget = self._target.timeout_s if timeout_s is None else min(
            timeout_s, self._target.timeout_s)
        return with_retries(lambda remaining: self._attempt(request, remaining), budget,
                            self._stop)

    def _attempt(self, request: Message | bytes, remaining_s: float) -> Attempt:
        call = self._export
        if isinstance(request, bytes):
            if self._raw is None:
                raise TypeError("this transport was built without a method for bytes")
            call = self._raw
        try:
            call(request, timeout=remaining_s, metadata=self._target.headers)
        except grpc.RpcError as error:
            code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
            retryable = code in RETRYABLE
            log.debug("OTLP/gRPC export to %s: %s (%s)", self._target.endpoint, code,
                      "will retry" if retryable else "final")
            if code is grpc.StatusCode.UNAVAILABLE:
                self._reconnect()
            if not retryable:
                log.warning("OTLP/gRPC export to %s refused: %s %s", self._target.endpoint,
                            code, error.details() if hasattr(error, "details") else "")
            return Attempt(ok=False, retryable=retryable, delay_s=_retry_delay(error))
        return Attempt(ok=True)

    def shutdown(self) -> None:
        self._stop.set()
        with self._lock:
            self._channel.close()
