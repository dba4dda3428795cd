"""A real Prometheus scrapes the agent on the simulated node; alerts reach a real Alertmanager.

One stack per module (simulated node, two agents — default and ``dcgm`` scheme —, Prometheus
with the shipped alert rules, Alertmanager, a webhook receiver), shared by the tests: the
scrape and evaluation intervals are 1 s, so the whole module takes well under a minute.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from plugins.nvidia.simulator import SimulatedNode
from tests.integration.conftest import UUIDS
from tests.integration.harness import REPO, AgentProcess, h100, write_scenario
from tests.integration.prometheus_stack import Stack, binaries_missing
from tests.receivers.netutil import free_port, wait_for_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver

pytestmark = pytest.mark.integration
RULES = REPO / "otel-config" / "alerts" / "gpu-alerts.rules.yaml"
ADAPTER = REPO / "helm" / "examples" / "prometheus-adapter-values.yaml"
NODE = "gpu-node-a"
UTIL = (10, 20, 30, 45)
USED_MIB = (1000, 2000, 3000, 4500)


@dataclass
class Scenario:
    node: SimulatedNode
    stack: Stack
    agents: dict[str, AgentProcess]


def _agent(workdir: Path, node: SimulatedNode, receiver: OtlpGrpcReceiver, scheme: str,
           port: int) -> AgentProcess:
    config = workdir / f"agent-{scheme}.yaml"
    config.write_text(yaml.safe_dump({
        "groups": {"slow": {"interval": 1.0}, "gpm": {"enabled": False}},
        "prometheus": {"enabled": True, "listen": f"127.0.0.1:{port}", "scheme": scheme},
    }), encoding="utf-8")
    agent = AgentProcess(workdir, receiver.endpoint, node.env,
                         ["--interval", "0.5", "--export-interval", "30", "--config", str(config),
                          "--log-level", "warning"],
                         env={"K8S_NODE_NAME": NODE})
    if not wait_for_port("127.0.0.1", port, 20, alive=lambda: agent.process.poll() is None):
        agent.close()
        raise AssertionError(f"agent endpoint never came up:\n{agent.log()[-3000:]}")
    return agent


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    missing = binaries_missing()
    if missing:
        pytest.skip(missing)
    workdir = tmp_path_factory.mktemp("prometheus")
    devices = [h100(i, uuid=UUIDS[i], utilization_gpu=UTIL[i], memory_used_mib=USED_MIB[i])
               for i in range(4)]
    scenario_file = write_scenario(workdir, {"driver_version": "580.95.05", "devices": devices})
    agents: dict[str, AgentProcess] = {}
    with SimulatedNode.start(scenario_file, state_dir=workdir / "node") as node, \
            OtlpGrpcReceiver() as receiver:
        try:
            ports = {scheme: free_port() for scheme in ("otel", "dcgm")}
            for scheme, port in ports.items():
                agents[scheme] = _agent(workdir, node, receiver, scheme, port)
            stack = Stack(workdir, {f"gpu-agent-{s}": f"127.0.0.1:{p}" for s, p in ports.items()},
                          [RULES])
            try:
                yield Scenario(node, stack, agents)
            finally:
                stack.close()
        finally:
            for agent in agents.values():
                agent.close()


def _values(result: list[dict[str, Any]], label: str) -> dict[str, float]:
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in result}


def test_otel_names_in_prometheus_equal_the_simulated_values(scenario: Scenario) -> None:
    stack = scenario.stack
    query = 'hw_gpu_utilization_ratio{job="gpu-agent-otel",hw_gpu_task="general"}'
    result = stack.wait_query(query, lambda r: len(r) == 4)
    assert _values(result, "hw_id") == {UUIDS[i]: UTIL[i] / 100 for i in range(4)}
    used = _values(stack.query("hw_gpu_memory_usage_bytes"), "hw_id")
    assert used == {UUIDS[i]: USED_MIB[i] * 1024 * 1024 for i in range(4)}
    assert _values(stack.query('target_info{job="gpu-agent-otel"}'), "k8s_node_name") == {NODE: 1}
    # Self-telemetry: 4 GPUs read every 0.5 s (fast) and every 1 s (slow) = 12 reads/s.
    stack.wait_query('sum(rate(gpu_agent_cycles_total{job="gpu-agent-otel"}[5s]))',
                     lambda r: bool(r) and 9 < float(r[0]["value"][1]) < 15)
    assert stack.targets_health() == {"gpu-agent-otel": "up ", "gpu-agent-dcgm": "up "}


def test_dcgm_names_in_prometheus_equal_the_simulated_values(scenario: Scenario) -> None:
    stack = scenario.stack
    result = stack.wait_query("DCGM_FI_DEV_GPU_UTIL", lambda r: len(r) == 4)
    assert _values(result, "UUID") == {UUIDS[i]: UTIL[i] for i in range(4)}
    assert {r["metric"]["device"] for r in result} == {f"nvidia{i}" for i in range(4)}
    fb = _values(stack.query("DCGM_FI_DEV_FB_USED"), "gpu")
    assert fb == {str(i): USED_MIB[i] for i in range(4)}


def _adapter_query(rule: dict[str, Any], matchers: str, group_by: str) -> str:
    series = rule["seriesQuery"].split("{", 1)[0]
    return (rule["metricsQuery"].replace("<<.Series>>", series)
            .replace("<<.LabelMatchers>>", matchers).replace("<<.GroupBy>>", group_by))


def test_the_shipped_prometheus_adapter_rules_return_the_simulated_values(
    scenario: Scenario,
) -> None:
    """The seed's adapter rules, as Prometheus Adapter expands them for a node lookup."""
    rules = {r["seriesQuery"]: r for r in yaml.safe_load(ADAPTER.read_text())["rules"]["custom"]}
    stack = scenario.stack
    util = _adapter_query(rules["DCGM_FI_DEV_GPU_UTIL{}"], f'NodeName="{NODE}"', "NodeName")
    assert util == f'avg(DCGM_FI_DEV_GPU_UTIL{{NodeName="{NODE}"}}) by (NodeName)'
    result = stack.wait_query(util, bool)
    assert _values(result, "NodeName") == {NODE: sum(UTIL) / 4}
    memory = _adapter_query(rules["DCGM_FI_DEV_FB_USED{}"], f'NodeName="{NODE}"', "NodeName")
    assert _values(stack.query(memory), "NodeName") == {NODE: sum(USED_MIB)}


def test_a_lost_gpu_fires_an_alert_that_reaches_alertmanager_and_the_webhook(
    scenario: Scenario,
) -> None:
    stack = scenario.stack
    stack.wait_query("hw_status", lambda r: len(r) >= 12)  # the rule has data to work on
    scenario.node.command({"op": "lost", "device": 3})
    try:
        alerts = _wait_for_alert(stack, "GpuLost")
        lost = [a for a in alerts if a["labels"]["hw_id"] == UUIDS[3]]
        assert lost, alerts
        labels = lost[0]["labels"]
        assert labels["severity"] == "critical"
        assert labels["gpu_index"] == "3"
        assert labels["job"] in {"gpu-agent-otel", "gpu-agent-dcgm"}  # served in both schemes
        assert UUIDS[3] in lost[0]["annotations"]["summary"]
        assert not [a for a in alerts if a["labels"]["hw_id"] != UUIDS[3]]
    finally:
        scenario.node.command({"op": "recover", "device": 3})


def _wait_for_alert(stack: Stack, name: str, timeout: float = 30) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alerts = [a for a in stack.webhook.alerts() if a["labels"]["alertname"] == name]
        if alerts:
            return alerts
        time.sleep(0.2)
    firing = stack.query("ALERTS")
    raise AssertionError(f"no {name} at the webhook after {timeout}s; ALERTS: {firing}")
