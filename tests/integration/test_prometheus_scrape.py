"""A real Prometheus scrapes the agent on the simulated node; alerts reach a real Alertmanager.

One stack per module (simulated node, two agents — default and ``dcgm`` scheme —, Prometheus
with the shipped alert rules, Alertmanager, a webhook receiver), shared by the tests: the
scrape and evaluation intervals are 1 s, so the whole module takes well under a minute.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from gpu_otel_agent.plugins.nvidia.simulator import SimulatedNode
from gpu_otel_agent.workloads.pods import ContainerAllocation, ContainerDevices, PodAllocation
from tests.integration.cgroups import Cgroups, Pod, cgroups, v1_root, v2_root
from tests.integration.conftest import UUIDS
from tests.integration.harness import REPO, AgentProcess, h100, write_scenario
from tests.integration.prometheus_stack import RecordingProxy, Stack, binaries_missing
from tests.receivers.kubelet import FakeKubelet
from tests.receivers.netutil import free_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver

pytestmark = pytest.mark.integration
RULES = REPO / "otel-config" / "alerts" / "gpu-alerts.rules.yaml"
ADAPTER = REPO / "helm" / "examples" / "prometheus-adapter-values.yaml"
DASHBOARDS = REPO / "otel-config" / "dashboards"
# Grafana's variables as a user on this node would pick them.
VARIABLES = {"$node": "gpu-node-a", "$gpu": ".*", "$namespace": "ml", "$pod": ".*",
             "$__rate_interval": "5s", "$__interval": "5s", "$__range": "1m"}
# Panels that are empty while nothing is wrong (no XID, no failed GPU, no idle pod, no throttle).
EMPTY_WHEN_HEALTHY = {"GPUs not ok", "XIDs by code (24 h)", "XIDs", "Idle pods holding GPU memory",
                      "Throttle reasons active", "ECC errors",
                      "Degraded subsystems (gray failures)"}
NODE = "gpu-node-a"
TEXT_JOB = "gpu-agent-text"
TEXT_ONLY = "text/plain;version=0.0.4"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
UTIL = (10, 20, 30, 45)
USED_MIB = (1000, 2000, 3000, 4500)
MIB = 1024 * 1024


MEMORY_RESOURCE = "example.com/gpu-memory"  # a fractional device plugin: 1 unit = 1 MiB
# Pods sharing the GPUs: (name, GPU, [(memory MiB, SM %) per process], allocated MiB)
PODS = (("infer-a", 0, ((1000, 20), (3000, 30)), 8192), ("infer-b", 1, ((2000, 40),), 4096))


@dataclass
class Scenario:
    node: SimulatedNode
    stack: Stack
    agents: dict[str, AgentProcess]
    pods: dict[str, Pod]
    proxies: dict[str, RecordingProxy]  # job -> the proxy Prometheus scrapes it through


def _pods(groups: Cgroups, node: SimulatedNode, kubelet: FakeKubelet) -> dict[str, Pod]:
    """Pods in real cgroups, their processes registered on the GPUs, names from the kubelet."""
    base = v2_root() or v1_root("pids")
    assert base is not None, "no cgroup hierarchy"
    pods, allocations = {}, []
    for name, gpu, processes, allocated_mib in PODS:
        pod = groups.pod(base, name)
        pods[name] = pod
        for memory, sm in processes:
            pid = groups.spawn(pod.cgroup)
            answer = node.command({"op": "proc_add", "device": gpu, "pid": pid,
                                   "used_memory_mib": memory, "sm_util": sm})
            assert answer["ok"], answer
        devices = (ContainerDevices("nvidia.com/gpu", (f"{UUIDS[gpu]}::1",)),
                   ContainerDevices(MEMORY_RESOURCE,
                                    tuple(f"m{i}" for i in range(allocated_mib))))
        allocations.append(PodAllocation(pod.namespace, name,
                                         (ContainerAllocation("server", devices),)))
    kubelet.set_pods(allocations)
    return pods


def _agent(workdir: Path, node: SimulatedNode, receiver: OtlpGrpcReceiver, *, scheme: str,
           port: int, kubelet: Path) -> AgentProcess:
    config = workdir / f"agent-{scheme}.yaml"
    config.write_text(yaml.safe_dump({
        "groups": {"slow": {"interval": 1.0}, "gpm": {"interval": 1.0},
                   "processes": {"interval": 0.5}},
        "prometheus": {"enabled": True, "listen": f"127.0.0.1:{port}", "scheme": scheme},
        "attribution": {"reconcile_interval": 1, "memory_resources": {MEMORY_RESOURCE: MIB},
                        "kubelet": {"socket": str(kubelet), "refresh_interval": 1}},
    }), encoding="utf-8")
    return AgentProcess(workdir, receiver.endpoint, node.env,
                         ["--interval", "0.5", "--export-interval", "30", "--config", str(config),
                          "--log-level", "warning"],
                         env={"K8S_NODE_NAME": NODE}).serving(port)


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
            OtlpGrpcReceiver() as receiver, cgroups() as groups, \
            FakeKubelet(workdir / "kubelet" / "kubelet.sock") as kubelet:
        try:
            pods = _pods(groups, node, kubelet)
            ports = {scheme: free_port() for scheme in ("otel", "dcgm")}
            for scheme, port in ports.items():
                agents[scheme] = _agent(workdir, node, receiver, scheme=scheme, port=port,
                                        kubelet=kubelet.socket_path)
            # Prometheus scrapes through recording proxies (what it asks for, what it gets);
            # the "text" job scrapes the otel agent as a scraper that only takes text 0.0.4
            # would, its series renamed text_* so they never mix with the others.
            proxies = {f"gpu-agent-{s}": RecordingProxy(f"127.0.0.1:{p}")
                       for s, p in ports.items()}
            proxies[TEXT_JOB] = RecordingProxy(f"127.0.0.1:{ports['otel']}", accept=TEXT_ONLY)
            stack = Stack(workdir, {job: proxy.address for job, proxy in proxies.items()},
                          [RULES], {TEXT_JOB: {"metric_relabel_configs": [
                              {"source_labels": ["__name__"], "regex": "(.*)",
                               "target_label": "__name__", "replacement": "text_${1}"}]}})
            try:
                yield Scenario(node, stack, agents, pods, proxies)
            finally:
                stack.close()
                for proxy in proxies.values():
                    proxy.close()
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
    stack.wait_query('sum(rate(gpu_agent_cycles_completed_total{job="gpu-agent-otel"}[5s]))',
                     lambda r: bool(r) and 9 < float(r[0]["value"][1]) < 15)
    assert stack.targets_health() == {"gpu-agent-otel": "up ", "gpu-agent-dcgm": "up ",
                                      TEXT_JOB: "up "}


def _scraped(proxy: RecordingProxy) -> Any:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if exchanges := proxy.metrics_exchanges():
            return exchanges[-1]
        time.sleep(0.2)
    raise AssertionError("Prometheus never scraped through the proxy")


@pytest.mark.parametrize("job", ["gpu-agent-otel", "gpu-agent-dcgm"])
def test_prometheus_asks_for_openmetrics_and_gzip_and_gets_them(
    scenario: Scenario, job: str,
) -> None:
    exchange = _scraped(scenario.proxies[job])
    accept = exchange.request["accept"]
    # What this Prometheus really sends, and what the agent made of it.
    assert accept.startswith("application/openmetrics-text;version=1.0.0")
    assert "text/plain;version=0.0.4" in accept
    assert "gzip" in exchange.request["accept-encoding"]
    assert exchange.response["content-type"] == OPENMETRICS
    assert exchange.response["content-encoding"] == "gzip"
    stack = scenario.stack
    stack.wait_query(f'up{{job="{job}"}} == 1', bool)
    # Prometheus parsed OpenMetrics: the counter family is named without _total there ...
    family = "hw_energy_joules" if job.endswith("otel") else "gpu_agent_exports_completed"
    metadata = stack.target_metadata(job, family)
    assert {m["type"] for m in metadata} == {"counter"}, metadata
    if job.endswith("otel"):
        assert {m["type"] for m in stack.target_metadata(job, "target")} == {"info"}
    # ... while the series keep their names.
    name = "hw_energy_joules_total" if job.endswith("otel") else "gpu_agent_exports_completed_total"
    assert stack.wait_query(f'{name}{{job="{job}"}}', bool)


def test_a_scraper_that_takes_only_text_gets_plain_text_0_0_4(scenario: Scenario) -> None:
    exchange = _scraped(scenario.proxies[TEXT_JOB])
    assert exchange.request["accept"] == TEXT_ONLY
    assert "accept-encoding" not in exchange.request
    assert exchange.response["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "content-encoding" not in exchange.response
    stack = scenario.stack
    assert {m["type"] for m in stack.target_metadata(TEXT_JOB, "hw_energy_joules_total")} == {
        "counter"}
    text = stack.wait_query('text_hw_gpu_utilization_ratio{hw_gpu_task="general"}',
                            lambda r: len(r) == 4)
    assert _values(text, "hw_id") == {UUIDS[i]: UTIL[i] / 100 for i in range(4)}


def test_library_call_telemetry_counts_the_calls_the_node_served(scenario: Scenario) -> None:
    stack = scenario.stack
    call = 'gpu_agent_call="nvmlDeviceGetUtilizationRates"'
    result = stack.wait_query(f"sum(gpu_agent_library_calls_total{{{call}}})", bool)
    reported = float(result[0]["value"][1])
    served = scenario.node.command({"op": "stats"})["calls"]["nvmlDeviceGetUtilizationRates"]
    # Both agents' counters as last scraped (up to ~1 s old) against the node's count now:
    # at most 2 agents x 4 GPUs x 2 reads/s x 2 s behind, never ahead.
    assert served - 40 <= reported <= served
    mean = stack.wait_query(
        f"sum(rate(gpu_agent_library_call_time_seconds_total{{{call}}}[5s])) / "
        f"sum(rate(gpu_agent_library_calls_total{{{call}}}[5s]))", bool)
    assert 0 < float(mean[0]["value"][1]) < 0.1  # seconds per call, on a local library


def test_dcgm_names_in_prometheus_equal_the_simulated_values(scenario: Scenario) -> None:
    stack = scenario.stack
    result = stack.wait_query("DCGM_FI_DEV_GPU_UTIL", lambda r: len(r) == 4)
    assert _values(result, "UUID") == {UUIDS[i]: UTIL[i] for i in range(4)}
    assert {r["metric"]["device"] for r in result} == {f"nvidia{i}" for i in range(4)}
    fb = _values(stack.query("DCGM_FI_DEV_FB_USED"), "gpu")
    assert fb == {str(i): USED_MIB[i] for i in range(4)}
    # GPUs a pod is allocated carry its pod/namespace/container, as with dcgm-exporter.
    by_pod = stack.query('DCGM_FI_DEV_GPU_UTIL{namespace="ml",container="server"}')
    assert _values(by_pod, "pod") == {"infer-a": UTIL[0], "infer-b": UTIL[1]}


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


def test_the_shipped_adapter_rules_give_each_pod_on_a_shared_gpu_its_own_share(
    scenario: Scenario,
) -> None:
    """Per-pod queries as Prometheus Adapter expands them for an HPA's pods lookup."""
    rules = yaml.safe_load(ADAPTER.read_text())["rules"]["custom"]
    by_series = {r["seriesQuery"]: r for r in rules}
    stack = scenario.stack
    matchers = 'NamespaceName="ml",PodName=~"infer-a|infer-b"'
    util = _adapter_query(by_series["DCGM_CUSTOM_PROCESS_SM_UTIL{}"], matchers, "PodName")
    result = stack.wait_query(util, lambda r: len(r) == 2, timeout=30)
    assert _values(result, "PodName") == {"infer-a": (20 + 30) / 2, "infer-b": 40}
    memory = _adapter_query(by_series["DCGM_CUSTOM_PROCESS_MEM_USED{}"], matchers, "PodName")
    assert _values(stack.query(memory), "PodName") == {"infer-a": 4000, "infer-b": 2000}
    ratio_rule = next(r for r in rules if "name" in r)
    assert ratio_rule["name"]["as"] == "${1}_GPU_MEM_USED_RATIO"
    ratio = _adapter_query(ratio_rule, matchers, "PodName")
    assert _values(stack.query(ratio), "PodName") == {"infer-a": 4000 / 8192,
                                                      "infer-b": 2000 / 4096}
    # The same pods in the default naming, through the shipped recording rule.
    recorded = stack.wait_query('k8s_pod:gpu_container_utilization:avg{k8s_pod_name="infer-a"}',
                                bool)
    assert _values(recorded, "k8s_pod_name") == {"infer-a": 0.5}


def _dashboard_queries() -> list[tuple[str, str, str]]:
    """(dashboard, panel, PromQL) of every Prometheus query the dashboards run."""
    queries = []
    for path in sorted(DASHBOARDS.glob("*.json")):
        board = json.loads(path.read_text(encoding="utf-8"))
        for variable in board["templating"]["list"]:
            query = variable.get("query")
            if isinstance(query, dict) and query["query"].startswith("label_values("):
                inner = query["query"].removeprefix("label_values(").rsplit(",", 1)[0]
                queries.append((path.name, f"variable {variable['name']}", inner))
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                if target["datasource"]["type"] == "prometheus":
                    queries.append((path.name, panel["title"], target["expr"]))
    return queries


def test_every_dashboard_query_runs_on_the_scraped_data(scenario: Scenario) -> None:
    stack = scenario.stack
    stack.wait_query("gpu_sm_utilization_ratio", bool)  # the slowest group has arrived
    queries = _dashboard_queries()
    assert len(queries) > 30
    empty = []
    for board, panel, template in queries:
        expr = template
        for name, value in sorted(VARIABLES.items(), key=lambda kv: -len(kv[0])):
            expr = expr.replace(name, value)
        result = stack.query(expr)  # asserts the query is valid PromQL
        if not result and panel not in EMPTY_WHEN_HEALTHY:
            empty.append(f"{board} / {panel}: {expr}")
    assert empty == []


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


def test_an_injected_xid_fires_an_alert_that_reaches_alertmanager_and_the_webhook(
    scenario: Scenario,
) -> None:
    """``gpu-agent sim xid`` -> NVML event -> gpu.xid.errors -> Prometheus -> Alertmanager."""
    stack = scenario.stack
    command = [sys.executable, "-m", "gpu_otel_agent", "sim", "xid", "--device", "1", "--code",
               "48", "--socket", str(scenario.node.socket_path)]
    subprocess.run(command, check=True, capture_output=True, timeout=30)
    counted = stack.wait_query(
        f'gpu_xid_errors_total{{job="gpu-agent-otel",hw_id="{UUIDS[1]}"}}', bool)
    assert [(r["metric"]["gpu_xid_code"], r["value"][1]) for r in counted] == [("48", "1")]
    alerts = _wait_for_alert(stack, "GpuXidCritical")
    assert {(a["labels"]["hw_id"], a["labels"]["gpu_xid_code"]) for a in alerts} == {
        (UUIDS[1], "48")}
    alert = alerts[0]
    assert alert["labels"]["severity"] == "critical"
    assert alert["status"] == "firing"
    assert alert["annotations"]["summary"] == \
        f"GPU 1 ({UUIDS[1]}) reported critical XID 48"


def test_a_degraded_nvlink_fires_the_subsystem_alert_at_the_webhook(scenario: Scenario) -> None:
    """A gray failure: NVLink link 2 of GPU 2 down on the simulated node -> the agent's
    debounced gpu.health.status{nvlink, degraded} -> Prometheus -> Alertmanager -> webhook."""
    stack = scenario.stack
    stack.wait_query('gpu_health_status{gpu_health_subsystem="nvlink"}', lambda r: len(r) >= 24)
    scenario.node.command({"op": "set", "device": 2, "values": {"nvlink.2.state": "down"}})
    try:
        deadline = time.monotonic() + 30
        alerts: list[dict[str, Any]] = []
        while not alerts and time.monotonic() < deadline:
            # Other tests of this module leave their own marks (an XID 48 is GPU 1's memory).
            alerts = [a for a in _wait_for_alert(stack, "GpuSubsystemDegraded")
                      if a["labels"]["hw_id"] == UUIDS[2]]
            time.sleep(0.2)
        assert {a["labels"]["gpu_health_subsystem"] for a in alerts} == {"nvlink"}, alerts
        assert {a["labels"]["job"] for a in alerts} <= {"gpu-agent-otel", "gpu-agent-dcgm"}
        assert alerts[0]["labels"]["severity"] == "warning"
        assert alerts[0]["annotations"]["summary"] == f"GPU 2 ({UUIDS[2]}) nvlink degraded"
    finally:
        scenario.node.command({"op": "set", "device": 2, "values": {"nvlink.2.state": "up"}})


def _wait_for_alert(stack: Stack, name: str, timeout: float = 30) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alerts = [a for a in stack.webhook.alerts() if a["labels"]["alertname"] == name]
        if alerts:
            return alerts
        time.sleep(0.2)
    firing = stack.query("ALERTS")
    raise AssertionError(f"no {name} at the webhook after {timeout}s; ALERTS: {firing}")
