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
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from google.protobuf.message import Message

from gpu_otel_agent.check.result import Result, failed, passed
from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.export.otlp.failure_words import (
    Problem,
    grpc_words,
    http_error_words,
    http_status_words,
)
from gpu_otel_agent.export.otlp.target import ExporterConfigError, OtlpTarget, resolve_target
from gpu_otel_agent.gpu_health.events import CHECK, HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.model.resource import ResourceView
from gpu_otel_agent.model.semconv import agent_resource
from gpu_otel_agent.model.snapshot import AgentSample, NodeSnapshot, Reading

if TYPE_CHECKING:
    pass

DEFAULT_TIMEOUT_S = 5.0


def _requests(resource: ResourceView) -> dict[str, Message]:
    from gpu_otel_agent.export.events.otlp_logs import LogEncoder
    from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder

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
    resource = agent_resource(config.node_name)
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


def _grpc(target: OtlpTarget, request: Message, timeout_s: float) -> Problem:
    """The agent's own gRPC client (``grpc.unary_client``), as the running agent sends."""
    from gpu_otel_agent.export.otlp.grpc_transport import grpc_client
    from gpu_otel_agent.export.otlp.senders import export_method
    from gpu_otel_agent.grpc.status import GrpcError

    try:
        client = grpc_client(target)
    except OSError as error:
        return (f"cannot read a TLS file: {error}", "fix otlp.certificate and the client "
                "certificate/key paths")
    try:
        client.unary(export_method(target.signal), request.SerializeToString(), timeout_s,
                     target.headers)
    except GrpcError as error:
        return grpc_words(target, error, timeout_s)
    finally:
        client.close()
    return None


def _http(target: OtlpTarget, request: Message, timeout_s: float) -> Problem:
    from gpu_otel_agent.export.otlp.http_transport import ssl_context

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
    except (OSError, http.client.HTTPException) as error:  # ssl.SSLError is an OSError
        return http_error_words(target, error, timeout_s)
    return http_status_words(target, status)
