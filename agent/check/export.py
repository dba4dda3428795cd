"""The collector's side of ``gpu-agent check``: one metric point and one log record, sent once
each to the configured collector with the agent's own encoders and target settings (endpoint,
TLS, headers, compression from the configuration and ``OTEL_EXPORTER_OTLP_*``).

One attempt, no retries, so the answer is the collector's own: the round-trip time when it
accepts, or what went wrong in words a person can act on (nothing listens, TLS, credentials,
a wrong port or path, no answer in time).
"""

from __future__ import annotations

import http.client
import os
import socket
import ssl
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from google.protobuf.message import Message
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.check.result import Result, failed, passed
from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.export.otlp_target import ExporterConfigError, OtlpTarget, resolve_target
from gpu_otel_agent.gpu_health.events import CHECK, HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.model.snapshot import AgentSample, NodeSnapshot, Reading
from gpu_otel_agent.version import VERSION

if TYPE_CHECKING:
    from gpu_otel_agent.export.grpc_status import GrpcError

DEFAULT_TIMEOUT_S = 5.0


def _requests(resource: Resource) -> dict[str, Message]:
    from gpu_otel_agent.export.events.encode import LogEncoder
    from gpu_otel_agent.export.otlp_proto import ProtoEncoder

    now = time.time_ns()
    snapshot = NodeSnapshot(devices=(), taken_ns=now, agent=AgentSample(
        (Reading("gpu_agent.check", 1),), start_time_ns=now, time_ns=now))
    record = HealthEvent(CHECK, now, Severity.INFO,
                         "gpu-agent check: test record (not a health event)", ())
    return {"METRICS": ProtoEncoder(resource).encode(snapshot),
            "LOGS": LogEncoder(resource).encode([record])}


def collector(config: AgentConfig, environ: Mapping[str, str] | None = None,
              timeout_s: float = DEFAULT_TIMEOUT_S) -> list[Result]:
    env = os.environ if environ is None else environ
    if config.exporter != "otlp":
        return [passed("collector", f"off (exporter: {config.exporter})")]
    resource = Resource.create({"service.name": "gpu-otel-agent", "service.version": VERSION,
                                "host.name": socket.gethostname()})
    results = []
    for signal, request in _requests(resource).items():
        name = f"collector {signal.lower()}"
        try:
            target = resolve_target(config, env, signal)
        except ExporterConfigError as error:
            results.append(failed(name, str(error), "fix otlp.* or OTEL_EXPORTER_OTLP_*"))
            continue
        budget = min(timeout_s, target.timeout_s)
        start = time.monotonic()
        problem = (_grpc if target.protocol == "grpc" else _http)(target, request, budget)
        elapsed = time.monotonic() - start
        where = f"{target.protocol} {target.endpoint}"
        if problem is None:
            results.append(passed(name, f"{where} accepted the test "
                                  f"{'point' if signal == 'METRICS' else 'record'} in "
                                  f"{elapsed * 1000:.0f} ms"))
        else:
            results.append(failed(name, f"{where}: {problem[0]}", problem[1]))
    return results


Problem = tuple[str, str] | None  # what happened, what to do


def _tls_words(target: OtlpTarget, text: str) -> Problem:
    lowered = text.lower()
    if "hostname" in lowered and "match" in lowered:
        return ("TLS: the collector's certificate is for another name",
                "use the host name on the certificate in the endpoint, or reissue it")
    if "certificate_verify_failed" in lowered or "certificate verify failed" in lowered \
            or "unable to get local issuer" in lowered or "self-signed" in lowered \
            or "self signed" in lowered:
        ca = target.certificate or "the system's CA bundle"
        return ("TLS: the collector's certificate is not signed by a CA we trust "
                f"({ca})", "set otlp.certificate / OTEL_EXPORTER_OTLP_CERTIFICATE to the CA "
                "that signed the collector's certificate")
    if "wrong version number" in lowered or ("ssl" in lowered and "handshake" in lowered):
        return ("TLS handshake failed (does the collector speak TLS on this port?)",
                "match TLS on both sides: otlp.insecure / an http:// or https:// endpoint")
    return None


def _ssl_words(target: OtlpTarget, error: ssl.SSLError) -> Problem:
    # A failed verification names its reason in ``verify_message`` (a host name mismatch
    # or an unknown issuer); its str() says "certificate verify failed" either way.
    if isinstance(error, ssl.SSLCertVerificationError) and error.verify_message:
        return _tls_words(target, f"certificate verify failed: {error.verify_message}")
    return _tls_words(target, str(error)) or (f"TLS: {error}", "check the certificates")


def _grpc(target: OtlpTarget, request: Message, timeout_s: float) -> Problem:
    """The agent's own gRPC client (``grpc_wire``), as the running agent sends."""
    from gpu_otel_agent.export.grpc_status import GrpcError
    from gpu_otel_agent.export.grpc_transport import grpc_client
    from gpu_otel_agent.export.senders import export_method

    try:
        client = grpc_client(target)
    except OSError as error:
        return (f"cannot read a TLS file: {error}", "fix otlp.certificate and the client "
                "certificate/key paths")
    try:
        client.unary(export_method(target.signal), request.SerializeToString(), timeout_s,
                     target.headers)
    except GrpcError as error:
        return _grpc_words(target, error, timeout_s)
    finally:
        client.close()
    return None


def _grpc_words(target: OtlpTarget, error: GrpcError, timeout_s: float) -> Problem:
    from gpu_otel_agent.export.grpc_status import StatusCode

    code, details, cause = error.code, error.details, error.__cause__
    if isinstance(cause, ssl.SSLError):
        return _ssl_words(target, cause)
    if isinstance(cause, ConnectionRefusedError):
        return ("nothing listens there (connection refused)",
                "start the collector or fix the endpoint (OTLP/gRPC is usually port 4317)")
    if isinstance(cause, socket.gaierror):
        return (f"cannot resolve the host ({cause})", "check the endpoint's host name")
    if isinstance(cause, TimeoutError) or code is StatusCode.DEADLINE_EXCEEDED:
        return (f"no answer within {timeout_s:g}s", "check the network path (firewall, "
                "network policy) and the collector's load")
    if code is StatusCode.UNAVAILABLE:
        if target.tls:
            return (f"unavailable over TLS ({details})", "if the collector speaks plain "
                    "gRPC, set otlp.insecure: true / OTEL_EXPORTER_OTLP_INSECURE=true")
        return (f"unavailable ({details})", "if the collector speaks TLS, drop otlp.insecure "
                "and set otlp.certificate")
    if code in (StatusCode.UNAUTHENTICATED, StatusCode.PERMISSION_DENIED):
        return (f"the collector refused the credentials ({code.name}: {details})",
                "set otlp.headers / OTEL_EXPORTER_OTLP_HEADERS (chart: otlp.existingSecret)")
    if code is StatusCode.UNIMPLEMENTED:
        return (f"no OTLP {target.signal.lower()} service there",
                "is this the collector's OTLP/gRPC port (4317), with a "
                f"{target.signal.lower()} pipeline? For OTLP/HTTP set otlp.protocol")
    return (f"{code.name}: {details}", "see the collector's log")


def _http(target: OtlpTarget, request: Message, timeout_s: float) -> Problem:
    from gpu_otel_agent.export.http_transport import ssl_context

    url = urlsplit(target.endpoint)
    if url.scheme not in ("http", "https") or not url.hostname:
        return (f"{target.endpoint!r} is not an http:// or https:// URL",
                "set otlp.endpoint to the collector's URL (port 4318)")
    body = request.SerializeToString()
    headers = {"content-type": "application/x-protobuf", **dict(target.headers)}
    try:
        connection: http.client.HTTPConnection = (
            http.client.HTTPSConnection(url.hostname, url.port, timeout=timeout_s,
                                        context=ssl_context(target))
            if url.scheme == "https" else
            http.client.HTTPConnection(url.hostname, url.port, timeout=timeout_s))
        connection.request("POST", url.path or "/", body=body, headers=headers)
        status = connection.getresponse().status
        connection.close()
    except ssl.SSLError as error:
        return _ssl_words(target, error)
    except ConnectionRefusedError:
        return ("nothing listens there (connection refused)",
                "start the collector or fix the endpoint (OTLP/HTTP is usually port 4318)")
    except TimeoutError:
        return (f"no answer within {timeout_s:g}s", "check the network path and the "
                "collector's load")
    except OSError as error:
        return (f"{error.strerror or error}", "check the endpoint's host and port")
    except http.client.HTTPException as error:
        return (f"not an HTTP answer ({type(error).__name__})",
                "is this the collector's OTLP/HTTP port (4318)?")
    if 200 <= status < 300:
        return None
    if status in (401, 403):
        return (f"HTTP {status}: the collector refused the credentials",
                "set otlp.headers / OTEL_EXPORTER_OTLP_HEADERS (chart: otlp.existingSecret)")
    if status == 404:
        return (f"HTTP 404 for {url.path}", "the endpoint is the collector's base URL; the "
                "agent appends /v1/metrics and /v1/logs")
    return (f"HTTP {status}", "see the collector's log")
