"""The instrumentation scope of everything the agent sends over OTLP, metrics and events alike:
one name, version and schema, so a backend groups both signals under one producer.

A plain record, not the SDK's ``InstrumentationScope``: that class's module brings
``opentelemetry.attributes`` and typing_extensions (0.7 MiB resident, issue 41) to a default
path that writes the scope's bytes itself (``wire_values.scope``). The SDK's exporters get the
SDK's class from :func:`sdk_scope`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpu_otel_agent.model.semconv import SCHEMA_URL
from gpu_otel_agent.version import VERSION

if TYPE_CHECKING:
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope


@dataclass(frozen=True)
class Scope:
    name: str
    version: str
    schema_url: str


SCOPE = Scope("gpu_otel_agent", VERSION, SCHEMA_URL)


def sdk_scope() -> InstrumentationScope:
    """:data:`SCOPE` as the SDK's class (for ``ScopeMetrics``)."""
    from opentelemetry.sdk.util.instrumentation import InstrumentationScope

    return InstrumentationScope(SCOPE.name, SCOPE.version, schema_url=SCOPE.schema_url)
