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

from agent.config.schema import AgentConfig
from agent.export.otlp_proto import ProtoEncoder
from agent.export.snapshot_exporters import (
    OtlpSnapshotExporter,
    SdkSnapshotExporter,
    SnapshotExporter,
)

_PROTOCOL_VARS = ("OTEL_EXPORTER_OTLP_METRICS_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")


class ExporterConfigError(ValueError):
    pass


def otlp_protocol(config: AgentConfig, environ: Mapping[str, str]) -> str:
    for name in _PROTOCOL_VARS:
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


def _file_settings(config: AgentConfig, environ: Mapping[str, str]) -> dict[str, Any]:
    otlp = config.otlp
    kwargs: dict[str, Any] = {}
    if otlp.endpoint and _unset(environ, "ENDPOINT", "METRICS_ENDPOINT"):
        kwargs["endpoint"] = otlp.endpoint
    if otlp.headers and _unset(environ, "HEADERS", "METRICS_HEADERS"):
        kwargs["headers"] = dict(otlp.headers)
    if otlp.timeout is not None and _unset(environ, "TIMEOUT", "METRICS_TIMEOUT"):
        kwargs["timeout"] = otlp.timeout
    return kwargs


def _build_otlp_exporter(config: AgentConfig, env: Mapping[str, str]) -> MetricExporter:
    kwargs = _file_settings(config, env)
    otlp = config.otlp
    if otlp_protocol(config, env) == "grpc":
        from grpc import Compression

        from agent.export.senders import GrpcRequestExporter

        if otlp.insecure is not None and _unset(env, "INSECURE", "METRICS_INSECURE"):
            kwargs["insecure"] = otlp.insecure
        if otlp.compression and _unset(env, "COMPRESSION", "METRICS_COMPRESSION"):
            kwargs["compression"] = (
                Compression.Gzip if otlp.compression == "gzip" else Compression.NoCompression
            )
        if otlp.certificate and _unset(env, "CERTIFICATE", "METRICS_CERTIFICATE"):
            from grpc import ssl_channel_credentials

            with open(otlp.certificate, "rb") as pem:
                kwargs["credentials"] = ssl_channel_credentials(pem.read())
        return GrpcRequestExporter(**kwargs)

    from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression

    from agent.export.senders import HttpRequestExporter

    if otlp.compression and _unset(env, "COMPRESSION", "METRICS_COMPRESSION"):
        kwargs["compression"] = (
            HttpCompression.Gzip if otlp.compression == "gzip" else HttpCompression.NoCompression
        )
    if otlp.certificate and _unset(env, "CERTIFICATE", "METRICS_CERTIFICATE"):
        kwargs["certificate_file"] = otlp.certificate
    if "endpoint" in kwargs and not str(kwargs["endpoint"]).rstrip("/").endswith("/v1/metrics"):
        # The file gives the collector's base URL, as OTEL_EXPORTER_OTLP_ENDPOINT does.
        kwargs["endpoint"] = str(kwargs["endpoint"]).rstrip("/") + "/v1/metrics"
    return HttpRequestExporter(**kwargs)


def build_snapshot_exporter(
    config: AgentConfig, resource: Resource, environ: Mapping[str, str] | None = None
) -> SnapshotExporter:
    env = os.environ if environ is None else environ
    if config.exporter == "console":
        return SdkSnapshotExporter(ConsoleMetricExporter(), resource)
    exporter = _build_otlp_exporter(config, env)
    from agent.export.senders import RequestExporter

    if isinstance(exporter, RequestExporter) and exporter.sends_requests():
        return OtlpSnapshotExporter(exporter, ProtoEncoder(resource))
    return SdkSnapshotExporter(exporter, resource)
