"""The instrumentation scope of everything the agent sends over OTLP, metrics and events alike:
one name, version and schema, so a backend groups both signals under one producer."""

from __future__ import annotations

from opentelemetry.sdk.util.instrumentation import InstrumentationScope

from gpu_otel_agent.model.semconv import SCHEMA_URL
from gpu_otel_agent.version import VERSION

SCOPE = InstrumentationScope("gpu_otel_agent", VERSION, schema_url=SCHEMA_URL)
