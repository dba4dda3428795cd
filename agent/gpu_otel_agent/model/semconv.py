"""The OpenTelemetry semantic conventions release the agent's names follow, and the resource
every signal carries.

Every ``hw.*`` metric and attribute the agent sends is "development" in that release; the
schema URL on resource and scope tells a backend (and the collector's schema processor) which
release to translate from when names move. The agent follows one release at a time and says
so here; ``tests/semconv`` checks every ``hw.*`` name against that release's model files.
"""

from __future__ import annotations

import socket

from gpu_otel_agent.model.resource import ResourceView, create
from gpu_otel_agent.model.uuid_text import uuid5_text
from gpu_otel_agent.version import VERSION

SEMCONV_VERSION = "1.44.0"
# The form the project publishes (open-telemetry/semantic-conventions schemas/1.44.0:
# "schema_url: https://opentelemetry.io/schemas/1.44.0").
SCHEMA_URL = f"https://opentelemetry.io/schemas/{SEMCONV_VERSION}"

# service.instance.id: "SHOULD be used as source of a UUID Version 5 and SHOULD use the following
# UUID as the namespace" (model/service/registry.yaml, v1.44.0).
SERVICE_INSTANCE_NAMESPACE = "4d63009a-8d0f-11ee-aad7-4c796ed8e320"
SERVICE_NAME = "gpu-otel-agent"


# The conventions' device attributes each hw.* metric lists (model/hardware, v1.44.0): the GPU
# refinements of hw.errors and hw.status carry the GPU's identity (vendor, model, driver,
# serial, firmware) and hw.type; the hw.gpu.* metrics the identity without hw.type; hw.power
# and hw.energy hw.type without the identity; hw.temperature and its limit neither (hw.id and
# hw.parent, the attributes common to all). A point carries no conventional attribute its
# metric does not list (tests/semconv checks it); our own gpu.* attributes (index, bus id,
# partition) are on every point.
GPU_IDENTITY = frozenset({"hw.vendor", "hw.model", "hw.driver_version", "hw.serial_number",
                          "hw.firmware_version"})
_TYPE = frozenset({"hw.type"})


def dropped_device_attributes(metric: str) -> frozenset[str]:
    """The conventional device attributes ``metric``'s points leave out."""
    if metric in ("hw.errors", "hw.status"):
        return frozenset()
    if metric.startswith("hw.gpu."):
        return _TYPE
    if metric in ("hw.power", "hw.energy"):
        return GPU_IDENTITY
    return GPU_IDENTITY | _TYPE


def node_name(k8s_node_name: str | None) -> str:
    """The node the agent watches: in Kubernetes its node name (the chart passes it from the
    Downward API; the pod's own hostname is the pod's name unless it shares the host network),
    elsewhere the host's name."""
    return k8s_node_name or socket.gethostname()


def service_instance_id(node: str) -> str:
    """The same on every restart of the agent on one node, so backends keep its series."""
    return uuid5_text(SERVICE_INSTANCE_NAMESPACE, f"{SERVICE_NAME}/{node}")


def agent_resource(k8s_node_name: str | None, extra: dict[str, str] | None = None) -> ResourceView:
    """The resource of every metric and log the agent sends (``OTEL_RESOURCE_ATTRIBUTES`` and
    ``OTEL_SERVICE_NAME`` merged in by ``Resource.create``, as users expect)."""
    node = node_name(k8s_node_name)
    attributes: dict[str, str] = {
        "service.name": SERVICE_NAME,
        "service.version": VERSION,
        "service.instance.id": service_instance_id(node),
        "host.name": node,
    }
    if k8s_node_name:
        attributes["k8s.node.name"] = k8s_node_name
    attributes.update(extra or {})
    return create(attributes, schema_url=SCHEMA_URL)
