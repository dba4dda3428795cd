"""The Collector configurations in otel-config/, checked statically (no collector binary here):
every pipeline wired to defined components, the gateway's safety processors in order, queues
on persistent storage, and health events — and only they — routed to Loki."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_otel_agent.gpu_health.events import EVENTS

REPO = Path(__file__).resolve().parents[3]
CONFIGS = REPO / "otel-config"
HEALTH_EVENTS = ("gpu.xid", "gpu.ecc", "gpu.lost", "gpu.recovered", "gpu.unresponsive",
                 "gpu.throttle", "gpu.health", "gpu.degraded", "gpu.healthy", "gpu.amd.vm_fault")


def test_the_event_list_is_the_agents() -> None:
    assert tuple(spec.name for spec in EVENTS) == HEALTH_EVENTS


def _load(name: str) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((CONFIGS / name).read_text(encoding="utf-8"))
    return config


@pytest.mark.parametrize("name", ["gateway.yaml", "local.yaml"])
def test_every_pipeline_uses_defined_components(name: str) -> None:
    config = _load(name)
    service = config["service"]
    for extension in service.get("extensions", []):
        assert extension in config["extensions"], extension
    used: set[str] = set()
    for pipeline, parts in service["pipelines"].items():
        assert pipeline.split("/")[0] in {"metrics", "logs", "traces"}
        for kind in ("receivers", "processors", "exporters"):
            for component in parts.get(kind, []):
                assert component in config[kind], f"{pipeline}: {component} not in {kind}"
                used.add(component)
    defined = {c for kind in ("receivers", "processors", "exporters") for c in config[kind]}
    assert defined == used, f"defined but unused: {defined - used}"


def test_gateway_pipelines_protect_memory_batch_and_route_per_signal() -> None:
    config = _load("gateway.yaml")
    pipelines = config["service"]["pipelines"]
    for name, parts in pipelines.items():
        processors = parts["processors"]
        assert processors[0] == "memory_limiter", name
        assert processors[-1] == "batch", name
        assert "k8sattributes" in processors, name
    assert pipelines["metrics"]["exporters"] == ["otlphttp/mimir"]
    assert pipelines["logs/health-events"]["exporters"] == ["otlphttp/loki"]
    assert "filter/health-events" in pipelines["logs/health-events"]["processors"]
    assert pipelines["traces"]["exporters"] == ["otlp/tempo"]


def test_k8sattributes_never_shadows_the_workload_attributes_on_data_points() -> None:
    extract = _load("gateway.yaml")["processors"]["k8sattributes"]["extract"]
    workload = {"k8s.pod.name", "k8s.pod.uid", "k8s.namespace.name", "k8s.container.name",
                "container.id"}
    assert not workload & set(extract["metadata"])
    assert not workload & {label["tag_name"] for label in extract.get("labels", [])}


def test_gateway_queues_are_persistent() -> None:
    config = _load("gateway.yaml")
    storages = {e["sending_queue"]["storage"] for e in config["exporters"].values()}
    assert storages == {"file_storage/queue"}
    assert "file_storage/queue" in config["service"]["extensions"]
    assert all(e["sending_queue"]["enabled"] for e in config["exporters"].values())


def test_the_loki_filter_keeps_exactly_the_health_events() -> None:
    """The OTTL condition drops what its regex does not match; the regex is run here."""
    (condition,) = _load("gateway.yaml")["processors"]["filter/health-events"]["logs"][
        "log_record"]
    match = re.fullmatch(r'not IsMatch\(attributes\["event\.name"\], "(.*)"\)', condition)
    assert match is not None, condition
    pattern = re.compile(match.group(1).replace("\\\\", "\\"))
    for event in HEALTH_EVENTS:
        assert pattern.search(event), event
    for other in ("gpu.xid.storm", "gpu.xidx", "gpu", "app.log", "gpu_xid", "",
                  "gpu.amd.vm_faults", "gpu.amdxvm_fault"):
        assert not pattern.search(other), other


def test_every_variable_the_gateway_needs_is_documented() -> None:
    text = (CONFIGS / "gateway.yaml").read_text(encoding="utf-8")
    needed = set(re.findall(r"\$\{env:([A-Z_]+)\}", text))  # those without a default
    assert needed == {"MIMIR_OTLP_ENDPOINT", "LOKI_OTLP_ENDPOINT", "TEMPO_OTLP_ENDPOINT",
                      "TENANT", "CLUSTER_NAME"}
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in readme for name in needed)
