"""docs/metrics.md against what a real agent exports: every metric name the agent pushes while
monitoring the simulated mixed-vendor node (NVIDIA and AMD, processes, every group) is in the
committed docs. The docs are generated from the catalog; this checks the catalog against the
samplers, an independent source."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from gpu_otel_agent.plugins.nvidia.simulator import SimulatedNode
from tests.integration.harness import REPO, SCENARIOS, AgentProcess
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.store import Store

pytestmark = pytest.mark.integration
CONFIG = "groups: {slow: {interval: 0.25}, gpm: {interval: 0.25}}\n"


def _documented() -> set[str]:
    text = (REPO / "docs" / "metrics.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([a-z_][a-z0-9_.]*)` \|", text, flags=re.MULTILINE))


def _exported(store: Store) -> set[str]:
    return {point.metric for point in store.points()}


def test_every_metric_a_running_agent_exports_is_documented(
    otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path
) -> None:
    config = tmp_path / "agent.yaml"
    config.write_text(CONFIG, encoding="utf-8")
    with SimulatedNode.start(SCENARIOS / "h100-mi300x-mixed.yaml",
                             state_dir=tmp_path / "node") as node:
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             ["--config", str(config), "--interval", "0.25",
                              "--export-interval", "0.25"])
        store = otlp_grpc_receiver.store
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
    exported = _exported(store)
    assert len(exported) >= 20, sorted(exported)
    undocumented = sorted(exported - _documented())
    assert undocumented == [], f"exported but not in docs/metrics.md: {undocumented}"
