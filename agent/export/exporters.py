"""Builds the metric exporter: OTLP over gRPC (default) or HTTP/protobuf, or the console.

The OpenTelemetry exporters read the standard ``OTEL_EXPORTER_OTLP_*`` variables themselves
(endpoint, headers, compression, certificate, timeout, insecure). Values from the agent's
configuration file are passed only where the matching variable is unset, so the environment
wins over the file as everywhere else in the agent.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricExporter
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.export.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.snapshot_exporters import (
    OtlpSnapshotExporter,
    SdkSnapshotExporter,
    SnapshotExporter,
)


class ExporterConfigError(ValueError):
    pass


def otlp_protocol(
    config: AgentConfig, environ: Mapping[str, str], signal: str = "METRICS"
) -> str:
    for name in (f"OTEL_EXPORTER_OTLP_{signal}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        value = environ.get(name)
        if value:
            if value not in ("grpc", "http/protobuf"):
                raise ExporterConfigError(
                    f"environment variable {name}: protocol {value!r} is not supported "
                    "(use grpc or http/protobuf)"
                )
            return value
    return config.otlp.protocol or "grpc"


def _unset(environ: Mapping[str, str], *names: str) -> bool:
    return not any(environ.get(f"OTEL_EXPORTER_OTLP_{n}") for n in names)


def otlp_settings(
    config: AgentConfig, env: Mapping[str, str], signal: str = "METRICS"
) -> tuple[str, dict[str, Any]]:
    """The protocol and the exporter keyword arguments for one signal (METRICS, LOGS).

    Values from the file only where neither the generic nor the signal's variable is set;
    the SDK exporter reads the variables itself. An HTTP endpoint from the file is the
    collector's base URL (as OTEL_EXPORTER_OTLP_ENDPOINT): the signal's path is appended.
    """
    otlp = config.otlp
    protocol = otlp_protocol(config, env, signal)
    kwargs: dict[str, Any] = {}
    if otlp.endpoint and _unset(env, "ENDPOINT", f"{signal}_ENDPOINT"):
        kwargs["endpoint"] = otlp.endpoint
    if otlp.headers and _unset(env, "HEADERS", f"{signal}_HEADERS"):
        kwargs["headers"] = dict(otlp.headers)
    if otlp.timeout is not None and _unset(env, "TIMEOUT", f"{signal}_TIMEOUT"):
        kwargs["timeout"] = otlp.timeout
    compression = otlp.compression and _unset(env, "COMPRESSION", f"{signal}_COMPRESSION")
    certificate = otlp.certificate and _unset(env, "CERTIFICATE", f"{signal}_CERTIFICATE")
    if protocol == "grpc":
        from grpc import Compression

        if otlp.insecure is not None and _unset(env, "INSECURE", f"{signal}_INSECURE"):
            kwargs["insecure"] = otlp.insecure
        if compression:
            kwargs["compression"] = (
                Compression.Gzip if otlp.compression == "gzip" else Compression.NoCompression
            )
        if certificate:
            from grpc import ssl_channel_credentials

            with open(str(otlp.certificate), "rb") as pem:
                kwargs["credentials"] = ssl_channel_credentials(pem.read())
        return protocol, kwargs

    from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression

    if compression:
        kwargs["compression"] = (
            HttpCompression.Gzip if otlp.compression == "gzip" else HttpCompression.NoCompression
        )
    if certificate:
        kwargs["certificate_file"] = otlp.certificate
    path = f"/v1/{signal.lower()}"
    if "endpoint" in kwargs and not str(kwargs["endpoint"]).rstrip("/").endswith(path):
        kwargs["endpoint"] = str(kwargs["endpoint"]).rstrip("/") + path
    return protocol, kwargs


def _build_otlp_exporter(config: AgentConfig, env: Mapping[str, str]) -> MetricExporter:
    protocol, kwargs = otlp_settings(config, env, "METRICS")
    if protocol == "grpc":
        from gpu_otel_agent.export.senders import GrpcRequestExporter

        return GrpcRequestExporter(**kwargs)

    from gpu_otel_agent.export.http_senders import HttpRequestExporter

    return HttpRequestExporter(**kwargs)


def build_snapshot_exporter(
    config: AgentConfig, resource: Resource, environ: Mapping[str, str] | None = None
) -> SnapshotExporter:
    env = os.environ if environ is None else environ
    if config.exporter == "console":
        return SdkSnapshotExporter(ConsoleMetricExporter(), resource)
    exporter = _build_otlp_exporter(config, env)
    from gpu_otel_agent.export.senders import RequestExporter

    if isinstance(exporter, RequestExporter) and exporter.sends_requests():
        return OtlpSnapshotExporter(exporter, ProtoEncoder(resource))
    return SdkSnapshotExporter(exporter, resource)
