"""What a real agent exports while monitoring the simulated mixed-vendor node (NVIDIA and AMD,
processes, every group), one run shared by two checks: every metric name is in the committed
docs/metrics.md (generated from the catalog: this checks the catalog against the samplers, an
independent source), and every ``hw.*`` point follows the semantic conventions' model files
vendored at the release the agent targets (``tests/semconv/v1.44.0``): metric name,
instrument, unit, attribute names, types and enum values."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from gpu_otel_agent.model.semconv import SCHEMA_URL
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.harness import REPO, SCENARIOS, AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import Point
from tests.receivers.store import Store
from tests.semconv.model import divergences, load

pytestmark = pytest.mark.integration
CONFIG = "groups: {slow: {interval: 0.25}, gpm: {interval: 0.25}}\n"


def _documented() -> set[str]:
    text = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([a-z_][a-z0-9_.]*)` \|", text, flags=re.MULTILINE))


def _exported(store: Store) -> set[str]:
    return {point.metric for point in store.points()}


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    tmp_path = tmp_path_factory.mktemp("mixed")
    config = tmp_path / "agent.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    with OtlpGrpcReceiver() as receiver, SimulatedNode.start(
            SCENARIOS / "h100-mi300x-mixed.yaml", state_dir=tmp_path / "node") as node:
        agent = AgentProcess(tmp_path, receiver.endpoint, node.env,
                             ["--config", str(config), "--interval", "0.25",
                              "--export-interval", "0.25"])
        store = receiver.store
        try:
            # Slow and per-process groups have reported on both vendors, and two more exports
            # followed, so names that appear only after the first cycle are in too.
            store.wait_for(lambda s: {p.attributes.get("hw.vendor")
                                      for p in s.points("gpu.power.limit")} >= {"NVIDIA", "AMD"}
                           and s.points("gpu.process.memory.usage"),
                           timeout=60, what="slow and process metrics of both vendors")
            seen = len(store.received("metrics"))
            store.wait_for(lambda s: len(s.received("metrics")) >= seen + 2, timeout=60,
                           what="two more exports")
        finally:
            agent.terminate(timeout=60)
            agent.close()
        yield store


def test_every_metric_a_running_agent_exports_is_documented(exported: Store) -> None:
    names = _exported(exported)
    assert len(names) >= 20, sorted(names)
    undocumented = sorted(names - _documented())
    assert undocumented == [], f"exported but not in docs/metrics.md: {undocumented}"


def _instrument(point: Point) -> str:
    if point.kind == "gauge":
        return "gauge"
    return "counter" if point.monotonic else "updowncounter"


def test_every_hw_point_a_running_agent_sends_follows_the_conventions(exported: Store) -> None:
    model = load()
    points = [p for p in exported.points() if p.metric.startswith("hw.")]
    names = {p.metric for p in points}
    assert {"hw.gpu.utilization", "hw.gpu.memory.utilization", "hw.gpu.memory.usage",
            "hw.gpu.memory.limit", "hw.gpu.io", "hw.power", "hw.energy", "hw.errors",
            "hw.status", "hw.temperature"} <= names, sorted(names)
    found = sorted({text for p in points
                    for text in divergences(model, p.metric, _instrument(p), p.unit,
                                            dict(p.attributes))})
    assert found == []
    # The schema the names are from, on every export.
    requests = exported.received("metrics")
    assert requests and all(
        rm.schema_url == SCHEMA_URL and all(sm.schema_url == SCHEMA_URL
                                            for sm in rm.scope_metrics)
        for received in requests
        for rm in received.request.resource_metrics)  # type: ignore[attr-defined]
