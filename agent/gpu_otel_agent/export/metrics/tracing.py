"""Traces of the agent's own pipeline (each OTLP export, each Prometheus scrape), to Tempo.

Off unless ``tracing.enabled``: a span per export is cheap, but nobody should pay for spans
they do not read. Spans go over OTLP to the same collector as the metrics (the standard
``OTEL_EXPORTER_OTLP_*`` / ``_TRACES_`` variables apply), batched on the SDK's own thread, so
tracing never adds a network round trip to an export or a scrape.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from gpu_otel_agent.config.schema import AgentConfig
from gpu_otel_agent.export.metrics.exporters import otlp_settings
from gpu_otel_agent.export.metrics.snapshot_exporters import SnapshotExporter
from gpu_otel_agent.model.resource import ResourceView, sdk_resource
from gpu_otel_agent.model.snapshot import NodeSnapshot
from gpu_otel_agent.threads.named import NamedThread
from gpu_otel_agent.version import VERSION

log = logging.getLogger(__name__)
SpanAttributes = Mapping[str, str | int | float | bool]


class SpanRecorder(Protocol):
    def span(self, name: str, attributes: SpanAttributes) -> contextlib.AbstractContextManager[Any]:
        ...

    def shutdown(self, timeout_s: float) -> None: ...


class NoTracing:
    def span(self, name: str, attributes: SpanAttributes) -> contextlib.AbstractContextManager[Any]:
        return contextlib.nullcontext()

    def shutdown(self, timeout_s: float) -> None:
        pass


class PipelineTracer:
    def __init__(self, config: AgentConfig, resource: ResourceView,
                 environ: Mapping[str, str] | None = None) -> None:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
        from opentelemetry.sdk.trace.sampling import ParentBased, TraceIdRatioBased

        env = os.environ if environ is None else environ
        sampler = ParentBased(TraceIdRatioBased(config.tracing.sample_ratio))
        self._provider = TracerProvider(resource=sdk_resource(resource), sampler=sampler)
        self._provider.add_span_processor(BatchSpanProcessor(_span_exporter(config, env)))
        self._tracer = self._provider.get_tracer("gpu_otel_agent", VERSION)

    @contextlib.contextmanager
    def span(self, name: str, attributes: SpanAttributes) -> Iterator[Any]:
        with self._tracer.start_as_current_span(name, attributes=dict(attributes)) as span:
            yield span

    def shutdown(self, timeout_s: float) -> None:
        """Flush what is batched, within ``timeout_s``: never hold up the agent's exit."""

        def flush() -> None:
            self._provider.force_flush(int(timeout_s * 1000))
            self._provider.shutdown()

        worker = NamedThread(target=flush, name="trace-flush", daemon=True)
        worker.start()
        worker.join(timeout_s)
        if worker.is_alive():
            log.warning("pipeline traces not flushed within %.1fs", timeout_s)


def _span_exporter(config: AgentConfig, env: Mapping[str, str]) -> Any:
    protocol, kwargs = otlp_settings(config, env, "TRACES")
    if protocol == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(**kwargs)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
        OTLPSpanExporter as HttpSpanExporter,
    )

    return HttpSpanExporter(**kwargs)


def build_tracer(config: AgentConfig, resource: ResourceView) -> SpanRecorder:
    if not config.tracing.enabled:
        return NoTracing()
    return PipelineTracer(config, resource)


class TracedExporter:
    """A SnapshotExporter whose every export is a span (with its outcome)."""

    def __init__(self, exporter: SnapshotExporter, tracer: SpanRecorder) -> None:
        self._exporter = exporter
        self._tracer = tracer

    def export(self, snapshot: NodeSnapshot, timeout_s: float) -> bool:
        attributes = {"gpu_agent.devices": len(snapshot.devices)}
        with self._tracer.span("gpu_agent.export", attributes) as span:
            ok = self._exporter.export(snapshot, timeout_s)
            if span is not None:
                span.set_attribute("gpu_agent.export.ok", ok)
            return ok

    def shutdown(self, timeout_s: float) -> None:
        self._exporter.shutdown(timeout_s)
