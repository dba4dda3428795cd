"""The Collector configurations in otel-config/, checked statically (no collector binary here):
every pipeline wired to defined components, the gateway's safety processors in order, queues
on persistent storage, and health events — and only they — routed to Loki."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_otel_agent.gpu_health.events import EVENTS
from gpu_otel_agent.model.metrics import (
    AGENT_METRICS,
    CUDA_METRICS,
    DEVICE_METRICS,
    PROCESS_METRICS,
)

REPO = Path(__file__).resolve().parents[3]
CONFIGS = REPO / "otel-config"
HEALTH_EVENTS = ("gpu.xid", "gpu.ecc", "gpu.lost", "gpu.recovered", "gpu.unresponsive",
                 "gpu.throttle", "gpu.health", "gpu.degraded", "gpu.healthy", "gpu.nvswitch.sxid",
                 "gpu.amd.vm_fault")


def test_the_event_list_is_the_agents() -> None:
    assert tuple(spec.name for spec in EVENTS) == HEALTH_EVENTS


def _load(name: str) -> dict[str, Any]:
    config: dict[str, Any] = yaml.safe_load((CONFIGS / name).read_text(encoding="utf-8"))
    return config


def _merged(*names: str) -> dict[str, Any]:
    """The collector's merge of several --config files: maps merge, anything else replaces."""
    def merge(base: Any, over: Any) -> Any:
        if isinstance(base, dict) and isinstance(over, dict):
            return {k: merge(base[k], v) if k in base else v for k, v in over.items()} | {
                k: v for k, v in base.items() if k not in over}
        return over
    config: dict[str, Any] = {}
    for name in names:
        config = merge(config, _load(name))
    return config


CONFIG_SETS = {"gateway.yaml": ("gateway.yaml",), "local.yaml": ("local.yaml",),
               "gateway.yaml + gateway-fleet.yaml": ("gateway.yaml", "gateway-fleet.yaml")}


@pytest.mark.parametrize("name", list(CONFIG_SETS))
def test_every_pipeline_uses_defined_components(name: str) -> None:
    config = _merged(*CONFIG_SETS[name])
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
    defined = {c for kind in ("receivers", "processors", "exporters")
               for c in config.get(kind, {})}
    assert defined == used, f"defined but unused: {defined - used}"


def test_gateway_pipelines_protect_memory_batch_and_route_per_signal() -> None:
    """The batch processor is deprecated (removed from the contrib distribution): each
    exporter batches in its own sending queue."""
    config = _load("gateway.yaml")
    pipelines = config["service"]["pipelines"]
    for name, parts in pipelines.items():
        processors = parts["processors"]
        assert processors[0] == "memory_limiter", name
        assert "k8s_attributes" in processors, name
        assert not [p for p in processors if p.split("/")[0] == "batch"], name
    assert not [p for p in config["processors"] if p.split("/")[0] == "batch"]
    for name, exporter in config["exporters"].items():
        assert exporter["sending_queue"]["batch"]["flush_timeout"], name
    assert pipelines["metrics"]["exporters"] == ["otlp_http/mimir"]
    assert pipelines["logs/health-events"]["exporters"] == ["otlp_http/loki"]
    assert "filter/health-events" in pipelines["logs/health-events"]["processors"]
    assert pipelines["traces"]["exporters"] == ["otlp_grpc/tempo"]


def test_k8s_attributes_finds_a_host_network_agent_pod_by_its_uid() -> None:
    """The processor never associates a host-network pod by IP (they share the node's), so
    the agent pod's UID (which the chart puts on its resource) is the first source; the
    resource processor drops it again afterwards, so it never stands for a workload's."""
    config = _load("gateway.yaml")
    association = config["processors"]["k8s_attributes"]["pod_association"]
    assert association[0] == {"sources": [{"from": "resource_attribute", "name": "k8s.pod.uid"}]}
    actions = config["processors"]["resource/cluster"]["attributes"]
    assert {"key": "k8s.pod.uid", "action": "delete"} in actions
    chart = (REPO / "helm" / "gpu-otel-agent" / "templates" / "_helpers.tpl").read_text()
    assert "k8s.pod.uid=$(POD_UID)" in chart and "fieldPath: metadata.uid" in chart


def test_k8sattributes_never_shadows_the_workload_attributes_on_data_points() -> None:
    extract = _load("gateway.yaml")["processors"]["k8s_attributes"]["extract"]
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
    (condition,) = _load("gateway.yaml")["processors"]["filter/health-events"]["log_conditions"]
    match = re.fullmatch(r'not IsMatch\(log\.attributes\["event\.name"\], "(.*)"\)',
                         condition)
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
    page = (REPO / "docs" / "kubernetes.md").read_text(encoding="utf-8")
    assert all(f"`{name}`" in page for name in needed)


def _fleet_filter() -> Callable[[str], bool]:
    """The fleet overlay's metric conditions, evaluated for a metric name (True: dropped).
    Only the two OTTL forms the overlay uses are understood; any other fails the test."""
    conditions = _load("gateway-fleet.yaml")["processors"]["filter/fleet"]["metric_conditions"]
    tests: list[Callable[[str], bool]] = []
    for condition in conditions:
        if match := re.fullmatch(r'IsMatch\(metric\.name, "(.*)"\)', condition):
            pattern = re.compile(match.group(1).replace("\\\\", "\\"))
            tests.append(lambda name, p=pattern: p.search(name) is not None)
        elif names := re.findall(r'metric\.name == "([^"]+)"', condition):
            assert condition == " or ".join(f'metric.name == "{n}"' for n in names), condition
            tests.append(lambda name, n=frozenset(names): name in n)
        else:
            raise AssertionError(f"unexpected OTTL condition: {condition}")
    return lambda name: any(test(name) for test in tests)


def test_the_fleet_overlay_drops_per_process_series_and_keeps_what_alerts_use() -> None:
    dropped = _fleet_filter()
    names = [spec.name for spec in (*DEVICE_METRICS, *PROCESS_METRICS, *CUDA_METRICS,
                                    *AGENT_METRICS)]
    gone = {n for n in names if dropped(n)}
    assert {n for n in names if n.startswith("gpu.process.")} <= gone
    assert {"gpu_agent.library.call.time", "gpu_agent.cycle.latency"} <= gone
    # Every name the overlay names exists (a typo would drop nothing, silently).
    assert gone == {n for n in names if n.startswith("gpu.process.")} | {
        "gpu_agent.library.call.time", "gpu_agent.cycle.latency"}
    kept = set(names) - gone
    assert {n for n in names if n.startswith(("gpu.container.", "hw."))} <= kept
    # No alert rule reads a dropped series (Prometheus names: dots become underscores).
    rules = "".join(p.read_text(encoding="utf-8") for p in (CONFIGS / "alerts").glob("*.y*ml"))
    for name in gone:
        assert name.replace(".", "_") not in rules, name
    pipeline = _merged("gateway.yaml", "gateway-fleet.yaml")["service"]["pipelines"]["metrics"]
    assert pipeline["processors"][:2] == ["memory_limiter", "filter/fleet"]


def test_the_collector_manifest_takes_every_component_from_one_release() -> None:
    """otel-config/otelcol-builder.yaml: core components at the release, contrib ones at the
    same release, except the stable (v1) ones, which contrib tags alongside it."""
    manifest = _load("otelcol-builder.yaml")
    release = "v" + manifest["dist"]["version"]
    modules = [m["gomod"].split() for kind in ("receivers", "processors", "exporters",
                                              "extensions") for m in manifest[kind]]
    assert modules
    for module, version in modules:
        if module.startswith("go.opentelemetry.io/collector/"):
            assert version == release, module
        else:
            assert module.startswith("github.com/open-telemetry/opentelemetry-collector-contrib/")
            assert version == release or version.startswith("v1."), module
