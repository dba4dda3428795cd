"""Collectors that answer too much, against a running agent (issue 39, item 7): an OTLP/HTTP
200 with a 128 MiB body, a gRPC answer of 15 MiB (under the 16 MiB the agent's client took
from any server). What the agent reads of an answer is bounded: its resident set stays far
below what reading the answers cost (the old code peaked at 304 MiB on a 256 MiB body), and
it goes on exporting."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.harness import AgentProcess
from tests.polling import wait_until
from tests.receivers.flooding import GrpcFlood, HttpFlood
from tests.receivers.hostile import rss_mib

pytestmark = pytest.mark.integration
FAST = ["--interval", "0.5", "--export-interval", "0.5"]
MAX_GROWTH_MIB = 48.0
EXPORTS = 8


def _watch(agent: AgentProcess, exports: Callable[[], int]) -> tuple[float, float]:
    """Baseline after the first export, and the peak over the next ``EXPORTS``."""
    pid = agent.process.pid
    wait_until(lambda: exports() >= 1, timeout=60, what="a first export")
    baseline = peak = rss_mib(pid)
    first = exports()

    def enough() -> bool:
        nonlocal peak
        peak = max(peak, rss_mib(pid))
        return exports() >= first + EXPORTS
    wait_until(enough, timeout=120, what=f"{EXPORTS} more exports")
    return baseline, peak


def test_an_http_collector_answering_128_mib_costs_the_agent_nothing(
    four_gpu_node: SimulatedNode, tmp_path: Path,
) -> None:
    with HttpFlood(128 << 20) as collector:
        agent = AgentProcess(tmp_path, collector.endpoint, four_gpu_node.env, FAST,
                             env={"OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"})
        try:
            baseline, peak = _watch(agent, lambda: collector.requests)
            assert peak - baseline < MAX_GROWTH_MIB, (baseline, peak)
        finally:
            agent.shutdown()
            agent.close()


def test_a_grpc_collector_answering_15_mib_costs_the_agent_nothing(
    four_gpu_node: SimulatedNode, tmp_path: Path,
) -> None:
    with GrpcFlood(15 << 20) as collector:
        agent = AgentProcess(tmp_path, collector.endpoint, four_gpu_node.env, FAST)
        try:
            baseline, peak = _watch(agent, lambda: collector.requests)
            assert peak - baseline < MAX_GROWTH_MIB, (baseline, peak)
        finally:
            agent.shutdown()
            agent.close()
