"""Every ``hw.*`` data point a running agent sends, against the semantic conventions' model
files vendored at the release the agent targets (``tests/semconv/v1.44.0``): metric name,
instrument, unit, attribute names, attribute types and enum values. The node is the simulated
mixed-vendor one (NVIDIA and AMD, processes, every group), so both backends' readers and the
series builder are what is checked, as they arrive at a real receiver."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_otel_agent.model.semconv import SCHEMA_URL
from gpu_otel_agent.plugins.nvidia.simulator import SimulatedNode
from tests.integration.harness import SCENARIOS, AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import Point
from tests.semconv.model import divergences, load

pytestmark = pytest.mark.integration
CONFIG = "groups: {slow: {interval: 0.25}, gpm: {interval: 0.25}}\n"


def _instrument(point: Point) -> str:
    if point.kind == "gauge":
        return "gauge"
    return "counter" if point.monotonic else "updowncounter"


def test_every_hw_point_a_running_agent_sends_follows_the_conventions(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    store = otlp_grpc_receiver.store
    with SimulatedNode.start(SCENARIOS / "h100-mi300x-mixed.yaml",
                             state_dir=tmp_path / "node") as node:
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             ["--config", str(config), "--interval", "0.25",
                              "--export-interval", "0.25"])
        try:
            # The slow group has reported on both vendors (hw.errors, fans, limits), then one
            # more export.
            store.wait_for(lambda s: {p.attributes.get("hw.vendor")
                                      for p in s.points("hw.errors")} >= {"NVIDIA", "AMD"},
                           timeout=60, what="slow metrics of both vendors")
            seen = len(store.received("metrics"))
            store.wait_for(lambda s: len(s.received("metrics")) >= seen + 1, timeout=60,
                           what="one more export")
        finally:
            agent.terminate(timeout=60)
            agent.close()
    model = load()
    points = [p for p in store.points() if p.metric.startswith("hw.")]
    names = {p.metric for p in points}
    assert {"hw.gpu.utilization", "hw.gpu.memory.utilization", "hw.gpu.memory.usage",
            "hw.gpu.memory.limit", "hw.gpu.io", "hw.power", "hw.energy", "hw.errors",
            "hw.status", "hw.temperature"} <= names, sorted(names)
    found = sorted({text for p in points
                    for text in divergences(model, p.metric, _instrument(p), p.unit,
                                            dict(p.attributes))})
    assert found == []
    # The schema the names are from, on every export.
    requests = store.received("metrics")
    assert requests and all(
        rm.schema_url == SCHEMA_URL and all(sm.schema_url == SCHEMA_URL
                                            for sm in rm.scope_metrics)
        for received in requests
        for rm in received.request.resource_metrics)  # type: ignore[attr-defined]
