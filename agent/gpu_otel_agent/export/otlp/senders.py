"""The OTLP fast path: requests the agent encoded itself, sent over its own small transports.

Why not the SDK's exporters: they take SDK data (``MetricsData``, log records) and encode it
themselves, and the agent's own encoder (``otlp_proto``) is what keeps an export cheap (the
docs' encode benchmark: 1.4 ms against the SDK's 9.8 ms for an 8-GPU export). Handing the
SDK a finished request is only possible through its private methods (``_translate_data``,
``_export``, ``_export_batch``), which any minor release may change, and the SDK's gRPC
exporter ignores the per-call timeout anyway. So the agent sends the bytes itself, with the
settings, TLS, compression, timeouts and retries of the OTLP specification (``target``,
``retry``): over gRPC as one unary call of its own client (``grpc_transport`` on
``grpc.unary_client``: the pure-Python ``h2`` on a socket; no grpcio and no generated ``*_pb2_grpc``
stubs, only the method's path as opentelemetry-proto's descriptor names it), or as a plain POST over
``http.client`` on a kept-alive connection (``http_transport``).

Why not grpcio for gRPC: it was the largest single cost of the running agent (issue 17): its
C core (``cygrpc``) was 14.8 MiB of a 65 MiB resident set, and its event-engine, lifeguard and
timer threads burned about 1.1 ms of CPU a second while idle plus about 1 ms per export, where
the agent's whole budget is 1 % of a core and 60 MiB.

The SDK path (``sdk_metrics`` -> the SDK exporter's public ``export()``) stays as the fallback, and
only it loads grpcio, chosen automatically when the encoder's wire contract with
opentelemetry-proto does not hold (``otlp_proto.wire_contract_problem``, run by the contract
test, not at start-up: see ``exporters.fast_path_problem``; ``build_snapshot_exporter``'s
``problem``) or when a Python-SDK
credential-provider entry point is configured, which only the SDK's exporters know how to load.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from google.protobuf.message import Message

from gpu_otel_agent.export.otlp.retry import Attempt
from gpu_otel_agent.export.otlp.target import OtlpTarget

# Python-SDK extensions that name an entry point supplying credentials or a session.
CREDENTIAL_PROVIDER_VARIABLES = {
    "grpc": ("OTEL_PYTHON_EXPORTER_OTLP_GRPC_CREDENTIAL_PROVIDER",
             "OTEL_PYTHON_EXPORTER_OTLP_GRPC_{signal}_CREDENTIAL_PROVIDER"),
    "http/protobuf": ("OTEL_PYTHON_EXPORTER_OTLP_HTTP_CREDENTIAL_PROVIDER",
                      "OTEL_PYTHON_EXPORTER_OTLP_HTTP_{signal}_CREDENTIAL_PROVIDER"),
}


class RequestSender(Protocol):
    """Sends one encoded OTLP request; blocks, so it runs on an export thread."""

    def send(self, request: Message | bytes | bytearray,
             timeout_s: float | None = None) -> Attempt:
        """The outcome of sending ``request`` (a message, or one already serialised: a
        ``bytearray`` is read in place, left unchanged by the caller until this returns),
        retries included: ``ok`` when the collector accepted it; one it refused for good
        (``Attempt.bad_content``, with its code) must be dropped, not sent again. Ends within
        the configured timeout and ``timeout_s``, whichever is shorter."""

    def shutdown(self) -> None: ...


def credential_provider(target: OtlpTarget, environ: Mapping[str, str]) -> str | None:
    """The credential-provider variable that is set for this signal, if any."""
    for pattern in CREDENTIAL_PROVIDER_VARIABLES[target.protocol]:
        name = pattern.format(signal=target.signal)
        if environ.get(name):
            return name
    return None


def build_request_sender(target: OtlpTarget) -> RequestSender:
    """A transport for ``target``; each transport's modules are imported only when used."""
    if target.protocol == "http/protobuf":
        from gpu_otel_agent.export.otlp.http_transport import HttpTransport

        return HttpTransport(target)
    from gpu_otel_agent.export.otlp.grpc_transport import GrpcTransport

    return GrpcTransport(target, export_method(target.signal))


# The gRPC paths of the services' ``Export``, as opentelemetry-proto's descriptors name them
# (tests/unit/export/metrics/test_otlp_contract.py and tests/unit/export/otlp/test_wire_values.py
# compare them): reading the descriptors here loaded protobuf's runtime for two constants.
EXPORT_METHODS = {
    "METRICS": "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export",
    "LOGS": "/opentelemetry.proto.collector.logs.v1.LogsService/Export",
}


def export_method(signal: str) -> str:
    """The gRPC path of the signal's ``Export`` (``/opentelemetry.proto.collector.metrics.v1.
    MetricsService/Export``); any signal but logs is metrics, as before."""
    return EXPORT_METHODS["LOGS" if signal == "LOGS" else "METRICS"]
