"""Builds the metric exporter: OTLP over gRPC (default) or HTTP/protobuf, or the console.

The console prints a line per GPU (``console_lines``) or, with ``console_format: otlp-json``,
the SDK console exporter's JSON. OTLP goes through the agent's own encoder and transports
(``otlp.senders``), configured by ``otlp.target``. The SDK's exporters remain for the
console's JSON, for pipeline traces and as the OTLP fallback (``otlp.senders`` says when).
They read the standard ``OTEL_EXPORTER_OTLP_*`` variables themselves; ``otlp_settings`` passes
values from the agent's configuration file only where the matching variable is unset, so the
environment wins over the file as everywhere else in the agent.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.export.metrics.console_lines import LinesSnapshotExporter
from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.metrics.snapshot_exporters import (
    NoSnapshotExporter,
    OtlpSnapshotExporter,
    SdkSnapshotExporter,
    SnapshotExporter,
)
from gpu_otel_agent.export.otlp.senders import build_request_sender, credential_provider
from gpu_otel_agent.export.otlp.target import ExporterConfigError, otlp_protocol, resolve_target
from gpu_otel_agent.model.resource import ResourceView

if TYPE_CHECKING:  # the SDK's metrics are imported only when an SDK exporter is built
    from opentelemetry.sdk.metrics.export import MetricExporter

__all__ = ["ExporterConfigError", "build_snapshot_exporter", "otlp_protocol", "otlp_settings"]
log = logging.getLogger(__name__)


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


def _sdk_otlp_exporter(config: AgentConfig, env: Mapping[str, str]) -> MetricExporter:
    protocol, kwargs = otlp_settings(config, env, "METRICS")
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        return OTLPMetricExporter(**kwargs)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import (
        OTLPMetricExporter as HttpOTLPMetricExporter,
    )

    return HttpOTLPMetricExporter(**kwargs)


def fast_path_problem(config: AgentConfig, env: Mapping[str, str]) -> str | None:
    """Why the agent's own encoder and transport cannot be used here (None: they can).

    The hand-written wire tags are not checked here against opentelemetry-proto's
    descriptors: that loads protobuf's runtime (3.7 MiB resident) to confirm field numbers a
    published .proto never changes; ``otlp_proto.wire_contract_problem`` runs in the contract
    test against the installed version instead (tests/unit/export/metrics/test_otlp_contract.py).
    """
    provider = credential_provider(resolve_target(config, env, "METRICS"), env)
    if provider is not None:
        return f"{provider} names an SDK credential provider"
    return None


def build_snapshot_exporter(
    config: AgentConfig,
    resource: ResourceView,
    environ: Mapping[str, str] | None = None,
    *,
    problem: str | None = None,
) -> SnapshotExporter:
    """The exporter for ``config``; ``problem`` forces the SDK fallback (for its tests)."""
    env = os.environ if environ is None else environ
    if config.exporter == "console" and config.console_format == "lines":
        return LinesSnapshotExporter()
    if config.exporter == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return SdkSnapshotExporter(ConsoleMetricExporter(), resource)
    if config.exporter == "none":
        return NoSnapshotExporter()
    problem = problem or fast_path_problem(config, env)
    if problem is not None:
        log.warning("metrics go through the OpenTelemetry SDK's exporter (slower): %s", problem)
        return SdkSnapshotExporter(_sdk_otlp_exporter(config, env), resource)
    target = resolve_target(config, env, "METRICS")
    return OtlpSnapshotExporter(build_request_sender(target), ProtoEncoder(resource))
