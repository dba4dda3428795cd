"""The resource every signal carries, made as the SDK's ``Resource.create`` makes it, without
importing ``opentelemetry.sdk.resources`` for the common case.

Why: that module brings psutil, platform, uuid, ``opentelemetry.attributes`` and
typing_extensions, 1.1 MiB resident of the agent's 45 MiB goal (issue 41); with the SDK's
``InstrumentationScope`` (``export/otlp/scope.py``) 1.8 MiB. The agent only reads a resource's
attributes and schema URL, so the default path builds a :class:`PlainResource` with the
SDK's own merge, in the SDK's own order:

    telemetry.sdk.* defaults  <  service.instance.id detector  <  OTEL_RESOURCE_ATTRIBUTES,
    OTEL_SERVICE_NAME ("otel" detector)  <  the caller's attributes

Anything off that plain path goes to the SDK itself, which then also logs what it logs: a
detector list other than the SDK's default (``OTEL_EXPERIMENTAL_RESOURCE_DETECTORS``), an
``OTEL_RESOURCE_ATTRIBUTES`` item without ``=`` or with an empty key, a caller's attribute that
is not a non-empty key with a string value, no ``service.instance.id`` from the caller (the
SDK's random one is then process-wide state), or no ``service.name`` in the end.
``tests/unit/model/test_resource.py`` checks both paths against the SDK's ``Resource.create``
over fixed and random environments; ``tests/unit/export/test_protobuf_off_start_up.py`` that
``gpu-agent run``'s default path does not import the SDK's module.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol
from urllib.parse import unquote

from opentelemetry.sdk import version as sdk_version

if TYPE_CHECKING:
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.util.types import AnyValue

# The SDK's names (opentelemetry.sdk.environment_variables, .resources), spelt here so the
# default path imports neither module; the reference test fails if the SDK's meaning moves.
OTEL_RESOURCE_ATTRIBUTES = "OTEL_RESOURCE_ATTRIBUTES"
OTEL_SERVICE_NAME = "OTEL_SERVICE_NAME"
OTEL_EXPERIMENTAL_RESOURCE_DETECTORS = "OTEL_EXPERIMENTAL_RESOURCE_DETECTORS"
_DEFAULT_DETECTORS = ["service_instance", "otel"]
_SDK_DEFAULTS = (("telemetry.sdk.language", "python"), ("telemetry.sdk.name", "opentelemetry"),
                 ("telemetry.sdk.version", sdk_version.__version__))
SERVICE_NAME = "service.name"
SERVICE_INSTANCE_ID = "service.instance.id"


class ResourceView(Protocol):
    """What the agent reads of a resource; the SDK's ``Resource`` is one too."""

    @property
    def attributes(self) -> Mapping[str, AnyValue]: ...

    @property
    def schema_url(self) -> str: ...


@dataclass(frozen=True, eq=False)
class PlainResource:
    """A resource made without the SDK: its attributes (read-only, in the SDK's order)."""

    attributes: Mapping[str, AnyValue]
    schema_url: str = ""


def create(attributes: Mapping[str, str], schema_url: str | None = None) -> ResourceView:
    """``Resource.create(attributes, schema_url)``'s attributes and schema URL; reads the
    process environment, as the SDK does."""
    detected = _plain_detected()
    plain = detected is not None and SERVICE_INSTANCE_ID in attributes and all(
        isinstance(key, str) and key and isinstance(value, str)
        for key, value in attributes.items())
    if detected is None or not plain:
        return _sdk_create(attributes, schema_url)
    merged: dict[str, AnyValue] = dict(_SDK_DEFAULTS)
    merged[SERVICE_INSTANCE_ID] = ""  # its place in the order; the caller's value wins below
    merged.update(detected)
    merged.update(attributes)
    if not merged.get(SERVICE_NAME):
        return _sdk_create(attributes, schema_url)
    return PlainResource(MappingProxyType(merged), schema_url or "")


def sdk_resource(resource: ResourceView) -> Resource:
    """The SDK's ``Resource`` of ``resource``, for the SDK's own exporters and tracer."""
    from opentelemetry.sdk.resources import Resource

    if isinstance(resource, Resource):
        return resource
    return Resource(dict(resource.attributes), resource.schema_url)


def _plain_detected() -> dict[str, str] | None:
    """The "otel" detector's attributes when the SDK would run only its two default detectors
    and the environment parses without a warning; None otherwise."""
    configured = [name.strip() for name in
                  os.environ.get(OTEL_EXPERIMENTAL_RESOURCE_DETECTORS, "").split(",")
                  if name.strip()]
    defaults = [] if "service_instance" in configured else ["service_instance"]
    if list(dict.fromkeys(defaults + configured + ["otel"])) != _DEFAULT_DETECTORS:
        return None
    detected: dict[str, str] = {}
    items = os.environ.get(OTEL_RESOURCE_ATTRIBUTES)
    if items:
        for item in items.split(","):
            key, equals, value = item.partition("=")
            if not equals or not key.strip():
                return None  # the SDK warns and drops it: let it
            detected[key.strip()] = unquote(value.strip())
    service_name = os.environ.get(OTEL_SERVICE_NAME)
    if service_name:
        detected[SERVICE_NAME] = service_name
    return detected


def _sdk_create(attributes: Mapping[str, str], schema_url: str | None) -> ResourceView:
    from opentelemetry.sdk.resources import Resource

    return Resource.create(dict(attributes), schema_url=schema_url)
