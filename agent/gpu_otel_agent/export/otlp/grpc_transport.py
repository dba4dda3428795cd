"""OTLP/gRPC: an encoded request sent as one unary call of the agent's own gRPC client.

The client (``grpc.unary_client``) is the pure-Python ``h2`` on a socket, not grpcio: grpcio's
C core was the largest single cost of the running agent (issue 17: 14.8 MiB of its 65 MiB
resident set, and background threads burning about 1.1 ms of CPU a second while idle plus 1 ms per
export). What the SDK's exporter does on top of the call is reproduced here, following the
OTLP specification: TLS with the configured CA and client certificate, headers as call
metadata, gzip, a deadline on every call, and retries with back-off on the retryable status
codes (honouring the collector's ``RetryInfo``, read where gRPC servers put it: in the
``google.rpc.Status`` of ``grpc-status-details-bin``, and in the older ``google.rpc.retryinfo-bin``
trailer; the delay holds every sender to that collector, ``throttle``). As the OTLP
specification says, ``RESOURCE_EXHAUSTED`` is retried only when it carries a ``RetryInfo``
(without one the server is out of a resource that waiting will not bring back). After
UNAVAILABLE the connection is dropped and the next try opens a fresh one, as the SDK rebuilds
its channel: behind a load balancer that may reach a collector that is up.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING

from google.protobuf.message import DecodeError, Message

from gpu_otel_agent.export.otlp.failure_log import FailureLog
from gpu_otel_agent.export.otlp.failure_words import grpc_words
from gpu_otel_agent.export.otlp.retry import SENT, Attempt, budget, with_retries
from gpu_otel_agent.export.otlp.target import OtlpTarget
from gpu_otel_agent.export.otlp.throttle import gate_for
from gpu_otel_agent.grpc.connection import tls_context
from gpu_otel_agent.grpc.status import GrpcError, Metadata, StatusCode
from gpu_otel_agent.grpc.unary_client import GrpcClient

if TYPE_CHECKING:
    from google.rpc.error_details_pb2 import RetryInfo

log = logging.getLogger(__name__)

# https://opentelemetry.io/docs/specs/otlp/#failures : these may succeed when tried again
# (RESOURCE_EXHAUSTED only with a RetryInfo: ``_retryable``).
RETRYABLE = frozenset({
    StatusCode.CANCELLED,
    StatusCode.DEADLINE_EXCEEDED,
    StatusCode.ABORTED,
    StatusCode.OUT_OF_RANGE,
    StatusCode.UNAVAILABLE,
    StatusCode.DATA_LOSS,
})
_RETRY_INFO_KEY = "google.rpc.retryinfo-bin"  # the older place of a RetryInfo
_STATUS_DETAILS_KEY = "grpc-status-details-bin"  # a google.rpc.Status: the standard place


# The most of an answer read (the gRPC client's max receive size): an OTLP answer is a
# partial success, a count and a message, and is not even read. A collector answering more
# (a 15 MiB message was taken whole, up to the client's 16 MiB default: +55 MiB resident) is
# cut off there, the connection dropped and the export counted failed (issue 39).
MAX_ANSWER_BYTES = 1024 * 1024


def grpc_client(target: OtlpTarget) -> GrpcClient:
    """The client for ``target``; TLS files are read now: a missing one is a configuration
    error at start-up, not a failed export later."""
    context = (tls_context(target.certificate, target.client_certificate, target.client_key)
               if target.tls else None)
    return GrpcClient.tcp(target.endpoint, context, gzip=target.compression == "gzip",
                          max_receive=MAX_ANSWER_BYTES)


def _bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode()


def _delay_s(info: RetryInfo) -> float:
    delay = info.retry_delay
    return max(float(delay.seconds) + float(delay.nanos) / 1e9, 0.0)


def _retry_delay(trailing: Metadata) -> float | None:
    """The delay the collector asked for; None (our own back-off) when it named none we can
    read. The trailers are the collector's input: a garbled one must not escape ``send``."""
    if not any(key in (_STATUS_DETAILS_KEY, _RETRY_INFO_KEY) for key, _ in trailing):
        return None
    # Imported on the first answer that carries one: any generated class loads protobuf's
    # upb runtime, 3.7 MiB resident, which a collector that never pushes back never needs.
    from google.rpc.error_details_pb2 import RetryInfo
    from google.rpc.status_pb2 import Status

    for key, value in trailing:
        if key == _STATUS_DETAILS_KEY:
            try:
                status = Status.FromString(_bytes(value))
                for detail in status.details:
                    if detail.Is(RetryInfo.DESCRIPTOR):
                        info = RetryInfo()
                        detail.Unpack(info)
                        return _delay_s(info)
            except DecodeError:
                log.debug("OTLP/gRPC: unreadable %s trailer ignored", key)
    for key, value in trailing:
        if key == _RETRY_INFO_KEY:
            try:
                return _delay_s(RetryInfo.FromString(_bytes(value)))
            except DecodeError:
                log.debug("OTLP/gRPC: unreadable %s trailer ignored", key)
    return None


# Final answers about the request's content (not the channel, the credentials or the server):
# the same request would be refused again, so a health event in it is quarantined.
BAD_CONTENT = frozenset({StatusCode.INVALID_ARGUMENT, StatusCode.FAILED_PRECONDITION})
# What a gRPC server receives per message unless configured otherwise (grpcio's and grpc-go's
# default max_receive_message_length; the Collector's otlp receiver keeps it,
# max_recv_msg_size_mib). Above it the server answers RESOURCE_EXHAUSTED, "received message
# larger than max (N vs. 4194304)" in both implementations' words, with no RetryInfo.
DEFAULT_MAX_MESSAGE = 4 * 1024 * 1024


def too_large(code: StatusCode, details: str, delay_s: float | None, size: int) -> bool:
    """The server refused the message for its size: as final as HTTP's 413, and about the
    content (the same request is refused again), so its record is quarantined and a batch
    split (issue 39: it was retried forever, 0 of 2 later events delivered in 40 s)."""
    return (code is StatusCode.RESOURCE_EXHAUSTED and delay_s is None
            and (size > DEFAULT_MAX_MESSAGE or "larger than max" in details.lower()))


def _retryable(code: StatusCode, delay_s: float | None) -> bool:
    if code is StatusCode.RESOURCE_EXHAUSTED:
        return delay_s is not None
    return code in RETRYABLE


class GrpcTransport:
    """Sends requests of one signal to ``method`` (``/package.Service/Export``)."""

    def __init__(self, target: OtlpTarget, method: str) -> None:
        self._target = target
        self._method = method
        self._stop = threading.Event()
        self._client = grpc_client(target)
        self._failures = FailureLog(f"OTLP/gRPC {target.signal.lower()} export",
                                    target.endpoint)
        self._gate = gate_for(target.endpoint)

    @property
    def target(self) -> OtlpTarget:
        return self._target

    def send(self, request: Message | bytes | bytearray,
             timeout_s: float | None = None) -> Attempt:
        """See :class:`~gpu_otel_agent.export.otlp.senders.RequestSender`."""
        data = (request if isinstance(request, (bytes, bytearray))  # not a Union made per call
                else request.SerializeToString())
        return with_retries(lambda remaining: self._attempt(data, remaining),
                            budget(self._target, timeout_s), self._stop, self._gate)

    def _attempt(self, request: bytes | bytearray, remaining_s: float) -> Attempt:
        try:
            # The answer, an Export...ServiceResponse, is not read (partial success is
            # informational in OTLP).
            self._client.unary(self._method, request, remaining_s, self._target.headers)
        except GrpcError as error:
            delay_s = _retry_delay(error.trailing_metadata)
            retryable = _retryable(error.code, delay_s)
            log.debug("OTLP/gRPC export to %s: %s (%s)", self._target.endpoint, error,
                      "will retry" if retryable else "final")
            if error.code is StatusCode.UNAVAILABLE:
                self._client.disconnect()
            words = grpc_words(self._target, error, remaining_s)
            if words is not None:
                self._failures.failed(*words)
            bad_content = not retryable and (
                error.code in BAD_CONTENT
                or too_large(error.code, error.details, delay_s, len(request)))
            return Attempt(ok=False, retryable=retryable, delay_s=delay_s,
                           code=error.code.name, bad_content=bad_content)
        self._failures.succeeded()
        return SENT

    def shutdown(self) -> None:
        self._stop.set()
        self._client.close()
