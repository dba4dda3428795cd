"""A real Prometheus scrapes the agent on the simulated node; alerts reach a real Alertmanager.

One node per module, shared by the tests: four H100s with pods in real cgroups, an A100 in MIG
mode with a pod on an instance, and a CPX MI300X (eight compute partitions) with a pod on a
partition. Two agents (default and ``dcgm`` scheme), each scraped by a Prometheus of its own
(with the shipped alert rules, an Alertmanager and a webhook receiver): a rule that works in
one scheme only cannot hide behind the other's series. Scrape and evaluation intervals are
1 s; the rules are loaded time-scaled (minutes read as seconds: ``for``, ``keep_firing_for``,
range windows and offsets), so an alert fires and resolves in seconds with the shipped
expressions.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from statistics import mean
from typing import Any

import pytest
import yaml

from gpu_otel_agent.simulation.node import SimulatedNode
from gpu_otel_agent.workloads.pods import ContainerAllocation, ContainerDevices, PodAllocation
from tests.integration.cgroups import Cgroups, Pod, cgroups, v1_root, v2_root
from tests.integration.conftest import UUIDS
from tests.integration.harness import REPO, AgentProcess, h100, write_scenario
from tests.integration.prometheus_stack import RecordingProxy, Stack, binaries_missing
from tests.receivers.kubelet import FakeKubelet
from tests.receivers.netutil import free_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.unit.deploy.kube_discovery import install_manifests
from tests.unit.simulator.simhelpers import run_client

pytestmark = pytest.mark.integration
RULES = REPO / "otel-config" / "alerts" / "gpu-alerts.rules.yaml"
ADAPTER = REPO / "helm" / "examples" / "prometheus-adapter-values.yaml"
CHART = REPO / "helm" / "gpu-otel-agent"
DASHBOARDS = REPO / "otel-config" / "dashboards"
MI300X = "0000:0c:00.0"
A100_INDEX, MI300X_INDEX = 4, 5
# Grafana's variables as a user on this node would pick them.
VARIABLES = {"$node": "gpu-node-a", "$gpu": ".*", "$namespace": "ml", "$pod": ".+",
             "$__rate_interval": "5s", "$__interval": "5s", "$__range": "1m"}
NODE = "gpu-node-a"
TEXT_JOB = "gpu-agent-text"
OPERATOR_JOB = "gpu-agent-dcgm-operator"  # the dcgm agent as the chart's ServiceMonitor has it
TEXT_ONLY = "text/plain;version=0.0.4"
OPENMETRICS = "application/openmetrics-text; version=1.0.0; charset=utf-8"
UTIL = (10, 20, 30, 45)
USED_MIB = (1000, 2000, 3000, 4500)
MIB = 1024 * 1024
H100S = 'hw_id=~"' + "|".join(UUIDS[:4]) + '"'


MEMORY_RESOURCE = "example.com/gpu-memory"  # a fractional device plugin: 1 unit = 1 MiB
# Pods sharing the GPUs: (name, GPU, [(memory MiB, SM %) per process], allocated MiB)
PODS = (("infer-a", 0, ((1000, 20), (3000, 30)), 8192), ("infer-b", 1, ((2000, 40),), 4096))


@dataclass
class Scenario:
    node: SimulatedNode
    stacks: dict[str, Stack]  # scheme -> the Prometheus that scrapes only that scheme's agent
    agents: dict[str, AgentProcess]
    pods: dict[str, Pod]
    proxies: dict[str, RecordingProxy]  # job -> the proxy Prometheus scrapes it through

    @property
    def stack(self) -> Stack:
        return self.stacks["otel"]


def _scaled_rules(workdir: Path) -> Path:
    """The shipped rules on a clock 60 times faster: minutes read as seconds."""
    text = RULES.read_text(encoding="utf-8")
    text = re.sub(r"(for|keep_firing_for): (\d+)m\b", r"\1: \2s", text)
    text = re.sub(r"\[(\d+)m\]", r"[\1s]", text)
    text = re.sub(r"offset (\d+)m\b", r"offset \1s", text)
    # Minutes written as seconds ("5 * 60") count from a fault's own time, not from the first
    # scrape after it: ten times faster, not sixty, so the export and scrape seconds between
    # the two do not eat the window.
    text = re.sub(r"\b(\d+) \* 60\b", r"\1 * 6", text)
    path = workdir / "gpu-alerts.scaled.rules.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def _mig_and_amd_pods(groups: Cgroups, node: SimulatedNode, base: Path
                      ) -> tuple[dict[str, Pod], list[PodAllocation]]:
    """A pod on a MIG instance (by its UUID) and one on an MI300X partition (by its BDF)."""
    # In a child process: a process attaches to one simulated node only, and other modules
    # of the session may have attached this one already.
    instance = run_client(node, f"""
out = N.nvmlDeviceGetUUID(N.nvmlDeviceGetMigDeviceHandleByIndex(h[{A100_INDEX}], 0))
if isinstance(out, bytes):
    out = out.decode()
""")
    pods = {"mig-a": groups.pod(base, "mig-a"), "rocm-a": groups.pod(base, "rocm-a")}
    for name, extra in (("mig-a", {"device": A100_INDEX, "mig": 0}),
                        ("rocm-a", {"device": MI300X_INDEX, "partition": 2})):
        pid = groups.spawn(pods[name].cgroup)
        answer = node.command({"op": "proc_add", "pid": pid, "used_memory_mib": 3000,
                               "sm_util": 50, **extra})
        assert answer["ok"], answer
    allocations = [
        PodAllocation(pods["mig-a"].namespace, "mig-a", (ContainerAllocation("server", (
            ContainerDevices("nvidia.com/mig-3g.40gb", (str(instance),)),)),)),
        PodAllocation(pods["rocm-a"].namespace, "rocm-a", (ContainerAllocation("server", (
            ContainerDevices("amd.com/gpu", (f"{MI300X[:-1]}2",)),)),)),
    ]
    return pods, allocations


def _pods(groups: Cgroups, node: SimulatedNode, kubelet: FakeKubelet) -> dict[str, Pod]:
    """Pods in real cgroups, their processes registered on the GPUs, names from the kubelet."""
    base = v2_root() or v1_root("pids")
    assert base is not None, "no cgroup hierarchy"
    pods, allocations = _mig_and_amd_pods(groups, node, base)
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
        # A recovered GPU is found at the next re-probe: every second here, not every 30 s,
        # so GpuLost resolves on the same clock as the rules (minutes read as seconds).
        "lost_reprobe_interval": 1.0,
        "prometheus": {"enabled": True, "listen": f"127.0.0.1:{port}", "scheme": scheme},
        "attribution": {"reconcile_interval": 1, "memory_resources": {MEMORY_RESOURCE: MIB},
                        "kubelet": {"socket": str(kubelet), "refresh_interval": 1}},
    }), encoding="utf-8")
    return AgentProcess(workdir, receiver.endpoint, node.env,
                         ["--interval", "0.5", "--export-interval", "30", "--config", str(config),
                          "--log-level", "warning"],
                         env={"K8S_NODE_NAME": NODE}).serving(port)


def faulty_node_devices() -> list[dict[str, object]]:
    """The node every real-Prometheus test serves (scrape, dcgm-4.9, OTLP): four H100s, an
    A100 with two MIG instances, a partitioned MI300X."""
    devices: list[dict[str, object]] = [
        h100(i, uuid=UUIDS[i], utilization_gpu=UTIL[i], memory_used_mib=USED_MIB[i])
        for i in range(4)]
    devices.append({"model": "NVIDIA A100-SXM4-80GB", "power_w": 250,
                    "mig": [{"profile": "3g.40gb", "memory_used_mib": 9000},
                            {"profile": "1g.10gb", "memory_used_mib": 2000}]})
    devices.append({"vendor": "amd", "model": "AMD Instinct MI300X", "pci_bus_id": MI300X,
                    "partition": {"compute": "CPX", "memory": "NPS4"}, "power_w": 600,
                    "utilization_gpu": 60, "memory_used_mib": 8000})
    return devices


@pytest.fixture(scope="module")
def scenario(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scenario]:
    missing = binaries_missing()
    if missing:
        pytest.skip(missing)
    workdir = tmp_path_factory.mktemp("prometheus")
    devices = faulty_node_devices()
    scenario_file = write_scenario(workdir, {"driver_version": "580.95.05",
                                             "amd_driver_version": "6.10.5",
                                             "devices": devices})
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
            # would, its series renamed text_* so they never mix with the others. Each scheme
            # has a Prometheus (and Alertmanager) of its own.
            proxies = {f"gpu-agent-{s}": RecordingProxy(f"127.0.0.1:{p}")
                       for s, p in ports.items()}
            proxies[TEXT_JOB] = RecordingProxy(f"127.0.0.1:{ports['otel']}", accept=TEXT_ONLY)
            rules = _scaled_rules(workdir)
            stacks: dict[str, Stack] = {}
            try:
                for scheme in ports:
                    home = workdir / scheme
                    home.mkdir()
                    targets = {f"gpu-agent-{scheme}": proxies[f"gpu-agent-{scheme}"].address}
                    extra = {}
                    if scheme == "dcgm":
                        # Scraped as the chart's ServiceMonitor has the Prometheus Operator
                        # scrape it: its honorLabels, the target's own pod labels.
                        targets[OPERATOR_JOB] = f"127.0.0.1:{ports['dcgm']}"
                        extra = {OPERATOR_JOB: _as_the_operator_scrapes()}
                    if scheme == "otel":
                        targets[TEXT_JOB] = proxies[TEXT_JOB].address
                        extra = {TEXT_JOB: {"metric_relabel_configs": [
                            {"source_labels": ["__name__"], "regex": "(.*)",
                             "target_label": "__name__", "replacement": "text_${1}"}]}}
                    stacks[scheme] = Stack(home, targets, [rules], extra)
                yield Scenario(node, stacks, agents, pods, proxies)
            finally:
                for stack in stacks.values():
                    stack.close()
                for proxy in proxies.values():
                    proxy.close()
        finally:
            for agent in agents.values():
                agent.close()


def _as_the_operator_scrapes() -> dict[str, Any]:
    """A scrape job as the Prometheus Operator makes one of the ServiceMonitor the chart
    renders for the dcgm scheme (helm/gpu-otel-agent, on a cluster with the CRD): its
    endpoint's honorLabels, and the target labels the Operator gives every target of a
    ServiceMonitor (namespace, pod, container, service, endpoint: the agent's own pod's).
    Its series are renamed operator_* so they never mix with the gpu-agent-dcgm job's."""
    monitor = next(d for d in install_manifests(CHART, {"prometheus": {"scheme": "dcgm"},
                                                        "serviceMonitor": {"enabled": True}})
                   if d["kind"] == "ServiceMonitor")
    (endpoint,) = monitor["spec"]["endpoints"]
    own = {"namespace": "monitoring", "pod": "gpu-gpu-otel-agent-x7k2p", "container": "agent",
           "service": "gpu-gpu-otel-agent", "endpoint": endpoint["port"]}
    return {
        "honor_labels": endpoint.get("honorLabels", False),
        "relabel_configs": [{"target_label": k, "replacement": v} for k, v in own.items()],
        "metric_relabel_configs": [{"source_labels": ["__name__"], "regex": "(.*)",
                                    "target_label": "__name__", "replacement": "operator_${1}"}],
    }


def test_the_charts_service_monitor_keeps_the_workloads_pod_labels_in_the_dcgm_scheme(
        scenario: Scenario) -> None:
    """The dcgm scheme labels a device series with the pod on the GPU; scraped through the
    chart's ServiceMonitor, that pod is `pod`, not `exported_pod` beside the agent's own."""
    stack = scenario.stacks["dcgm"]
    pod = scenario.pods["infer-a"]
    result = stack.wait_query(f'operator_DCGM_FI_DEV_GPU_UTIL{{pod="{pod.name}"}}', bool)
    assert {r["metric"]["namespace"] for r in result} == {pod.namespace}
    assert stack.query('{__name__=~"operator_.+",exported_pod!=""}') == []
    # A series of no pod (the GPUs no pod uses) keeps the target's: the agent's own pod.
    assert stack.query('operator_DCGM_FI_DEV_GPU_UTIL{pod="gpu-gpu-otel-agent-x7k2p"}')


def _values(result: list[dict[str, Any]], label: str) -> dict[str, float]:
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in result}


def test_otel_names_in_prometheus_equal_the_simulated_values(scenario: Scenario) -> None:
    stack = scenario.stack
    query = f'hw_gpu_utilization_ratio{{job="gpu-agent-otel",hw_gpu_task="general",{H100S}}}'
    result = stack.wait_query(query, lambda r: len(r) == 4)
    assert _values(result, "hw_id") == {UUIDS[i]: UTIL[i] / 100 for i in range(4)}
    used = _values(stack.query(f"hw_gpu_memory_usage_bytes{{{H100S}}}"), "hw_id")
    assert used == {UUIDS[i]: USED_MIB[i] * 1024 * 1024 for i in range(4)}
    assert _values(stack.query('target_info{job="gpu-agent-otel"}'), "k8s_node_name") == {NODE: 1}
    # host.name is the node (from K8S_NODE_NAME, as the chart passes spec.nodeName), not the
    # agent's own hostname.
    assert _values(stack.query('target_info{job="gpu-agent-otel"}'), "host_name") == {NODE: 1}
    # Self-telemetry, per H100: fast every 0.5 s, slow and gpm every 1 s, processes every
    # 0.5 s: 6 group reads a second (at least fast and slow: 3).
    stack.wait_query(f'sum(rate(gpu_agent_cycles_completed_total{{job="gpu-agent-otel",'
                     f'{H100S}}}[5s])) / 4',
                     lambda r: bool(r) and 2.5 < float(r[0]["value"][1]) < 7)
    assert stack.targets_health() == {"gpu-agent-otel": "up ", TEXT_JOB: "up "}
    assert scenario.stacks["dcgm"].targets_health() == {"gpu-agent-dcgm": "up ",
                                                          OPERATOR_JOB: "up "}


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
    stack = scenario.stacks[job.rsplit("-", 1)[1]]
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
    text = stack.wait_query(f'text_hw_gpu_utilization_ratio{{hw_gpu_task="general",{H100S}}}',
                            lambda r: len(r) == 4)
    assert _values(text, "hw_id") == {UUIDS[i]: UTIL[i] / 100 for i in range(4)}


def test_library_call_telemetry_counts_the_calls_the_node_served(scenario: Scenario) -> None:
    stack = scenario.stack
    call = 'gpu_agent_call="nvmlDeviceGetUtilizationRates"'
    reported = sum(float(s.wait_query(f"sum(gpu_agent_library_calls_total{{{call}}})",
                                      bool)[0]["value"][1]) for s in scenario.stacks.values())
    served = scenario.node.command({"op": "stats"})["calls"]["nvmlDeviceGetUtilizationRates"]
    # Both agents' counters as last scraped (up to ~1 s old) against the node's count now:
    # at most 2 agents x 5 NVIDIA GPUs x 2 reads/s x 2 s behind, never ahead.
    assert served - 50 <= reported <= served
    mean = stack.wait_query(
        f"sum(rate(gpu_agent_library_call_time_seconds_total{{{call}}}[5s])) / "
        f"sum(rate(gpu_agent_library_calls_total{{{call}}}[5s]))", bool)
    assert 0 < float(mean[0]["value"][1]) < 0.1  # seconds per call, on a local library


def test_dcgm_names_in_prometheus_equal_the_simulated_values(scenario: Scenario) -> None:
    stack = scenario.stacks["dcgm"]
    dcgm_h100s = H100S.replace("hw_id", "UUID")
    result = stack.wait_query(f"DCGM_FI_DEV_GPU_UTIL{{{dcgm_h100s}}}", lambda r: len(r) == 4)
    assert _values(result, "UUID") == {UUIDS[i]: UTIL[i] for i in range(4)}
    assert {r["metric"]["device"] for r in result} == {f"nvidia{i}" for i in range(4)}
    fb = _values(stack.query(f"DCGM_FI_DEV_FB_USED{{{dcgm_h100s}}}"), "gpu")
    assert fb == {str(i): USED_MIB[i] for i in range(4)}
    # A mixed node: each device's own driver, never a comma-joined pair.
    drivers = {r["metric"].get("DCGM_FI_DRIVER_VERSION")
               for r in stack.query("DCGM_FI_DEV_FB_USED")}
    assert drivers == {"580.95.05", "6.10.5"}
    # The resource as target_info, as in the default scheme (panels join on it).
    assert _values(stack.query("target_info"), "k8s_node_name") == {NODE: 1}
    # GPUs a pod is allocated carry its pod/namespace/container, as with dcgm-exporter.
    by_pod = stack.query(f'DCGM_FI_DEV_GPU_UTIL{{namespace="ml",container="server",{dcgm_h100s}}}')
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
    stack = scenario.stacks["dcgm"]
    stack.wait_query('DCGM_FI_DEV_FB_USED{device=~"amd.*"}', bool)
    # Each GPU once: an H100 shared by two pods is one series per pod; a partitioned GPU is
    # its own figure, or its partitions' where only they report (the MIG A100 serves no
    # utilization).
    util = _adapter_query(rules["DCGM_FI_DEV_GPU_UTIL{}"], f'NodeName="{NODE}"', "NodeName")
    result = stack.wait_query(util, bool)
    per_gpu = _per_gpu(stack.query("DCGM_FI_DEV_GPU_UTIL"), "UUID", "GPU_I_ID", mean)
    assert _values(result, "NodeName") == {NODE: pytest.approx(mean(per_gpu.values()))}
    assert len(per_gpu) == 5
    memory = _adapter_query(rules["DCGM_FI_DEV_FB_USED{}"], f'NodeName="{NODE}"', "NodeName")
    used = _per_gpu(stack.query("DCGM_FI_DEV_FB_USED"), "UUID", "GPU_I_ID", sum)
    assert len(used) == 6 and sum(USED_MIB) < sum(used.values())
    assert _values(stack.query(memory), "NodeName") == {NODE: pytest.approx(sum(used.values()))}


def _per_gpu(result: list[dict[str, Any]], gpu: str, partition: str,
             combine: Callable[[Iterable[float]], float],
             part_key: str | None = None) -> dict[str, float]:
    """Each physical GPU's figure from raw series: its own (once, whatever pods repeat it),
    or where only its partitions report, theirs combined."""
    whole: dict[str, float] = {}
    parts: dict[str, dict[str, float]] = {}
    for r in result:
        labels, value = r["metric"], float(r["value"][1])
        if labels.get(partition):
            parts.setdefault(labels[gpu], {})[labels[part_key or partition]] = value
        else:
            whole[labels[gpu]] = value
    return {**{g: combine(v.values()) for g, v in parts.items()}, **whole}


def test_the_shipped_adapter_rules_give_each_pod_on_a_shared_gpu_its_own_share(
    scenario: Scenario,
) -> None:
    """Per-pod queries as Prometheus Adapter expands them for an HPA's pods lookup."""
    rules = yaml.safe_load(ADAPTER.read_text())["rules"]["custom"]
    by_series = {r["seriesQuery"]: r for r in rules}
    stack = scenario.stacks["dcgm"]
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
    recorded = scenario.stack.wait_query(
        'k8s_pod:gpu_container_utilization:avg{k8s_pod_name="infer-a"}', bool)
    assert _values(recorded, "k8s_pod_name") == {"infer-a": 0.5}


def _panel(board: str, title: str) -> str:
    (expr,) = [q for b, t, q in _dashboard_queries() if b == board and t == title]
    return _substituted(expr)


def test_partitions_count_as_their_gpu_and_mig_and_amd_pods_can_be_selected(
        scenario: Scenario) -> None:
    """The overview counts each physical GPU once: a partitioned one (the MIG A100, the CPX
    MI300X) by its own figure, or its partitions' where only they report; the pods dashboard's
    variables list the pods on a MIG instance and on an MI300X partition (they have no
    per-container utilization: MIG serves none, HIP work is not engine time). Runs before
    the fault tests (an XID 79 takes a GPU off the bus)."""
    stack = scenario.stack
    stack.wait_query('hw_gpu_memory_usage_bytes{gpu_pci_bus_id=~"0000:0c:.*"}', bool)
    mean_panel = _panel("gpu-cluster-overview.json", "Mean utilization")
    per_gpu = _per_gpu([{**r, "metric": {**r["metric"], "gpu": r["metric"].get("hw_parent")
                                         or r["metric"]["hw_id"]}}
                        for r in stack.query('hw_gpu_utilization_ratio{hw_gpu_task="general"}')],
                       "gpu", "hw_parent", mean, "hw_id")
    assert len(per_gpu) == 5  # four H100s and the MI300X; the MIG A100 serves no utilization
    assert float(stack.query(mean_panel)[0]["value"][1]) == pytest.approx(
        mean(per_gpu.values()))
    memory = _panel("gpu-cluster-overview.json", "Memory used by node")
    raw = stack.query("hw_gpu_memory_usage_bytes")
    used = _per_gpu([{**r, "metric": {**r["metric"], "gpu": r["metric"].get("hw_parent")
                                      or r["metric"]["hw_id"]}} for r in raw],
                    "gpu", "hw_parent", sum, "hw_id")
    assert len(used) == 6  # the MIG A100 and the MI300X once each, with the four H100s
    assert float(stack.query(memory)[0]["value"][1]) == pytest.approx(sum(used.values()))
    pods_variable = next(q for b, t, q in _dashboard_queries()
                     if b == "gpu-pods.json" and t == "variable pod")
    found = {r["metric"]["k8s_pod_name"] for r in stack.wait_query(
        _substituted(pods_variable), lambda r: len(r) >= 4, timeout=30)}
    assert {"infer-a", "infer-b", "mig-a", "rocm-a"} <= found


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
            elif isinstance(query, dict) and query["query"].startswith("query_result("):
                inner = query["query"].removeprefix("query_result(").removesuffix(")")
                queries.append((path.name, f"variable {variable['name']}", inner))
        for panel in board["panels"]:
            for target in panel.get("targets", []):
                if target["datasource"]["type"] == "prometheus":
                    queries.append((path.name, panel["title"], target["expr"]))
    return queries


def _rule_queries(stack: Stack) -> list[tuple[str, str, str]]:
    """(rule file, rule name, PromQL) of every alert and recording rule, as loaded (scaled)."""
    scaled = stack.workdir.parent / "gpu-alerts.scaled.rules.yaml"
    return [(RULES.name, rule.get("alert") or rule["record"], rule["expr"])
            for group in yaml.safe_load(scaled.read_text())["groups"]
            for rule in group["rules"]]


def _adapter_queries() -> list[tuple[str, str, str]]:
    """(file, rule, PromQL) of every Prometheus Adapter rule, expanded as the adapter does for
    a node lookup (per-node rules) or a pods lookup (per-pod rules)."""
    out = []
    for rule in yaml.safe_load(ADAPTER.read_text())["rules"]["custom"]:
        by_pod = "PodName" in rule["resources"]["overrides"]
        matchers = ('NamespaceName="ml",PodName=~"infer-a|infer-b|mig-a|rocm-a"' if by_pod
                    else f'NodeName="{NODE}"')
        name = rule.get("name", {}).get("as", rule["seriesQuery"])
        out.append((ADAPTER.name, name,
                    _adapter_query(rule, matchers, "PodName" if by_pod else "NodeName")))
    return out


# What stays empty on this node even with the faults injected, and why. Anything else that
# returns no data fails the test.
NO_DATA_HERE = {
    ("otel", "Idle pods holding GPU memory"): "no pod here is idle (<5 %) while holding memory",
    ("otel", "GpuUnresponsive"): "no device call hangs here (tests/integration/"
                                 "test_nvml_resilience.py hangs one)",
    ("otel", "GpuAgentMissingCycles"): "no GPU hangs, so no cycles are missed",
    ("otel", "GpuAgentExportFailing"): "the agent pushes to a receiver that accepts",
    ("otel", "GpuAgentEventsDropped"): "the collector is up: the spool never fills",
    ("otel", "GpuAgentEventsBacklog"): "the collector accepts every event",
    ("otel", "GpuNvlinkFailed"): "a fatal NVLink XID comes only from a kernel-log line "
                                 "(tests/integration/test_link_xids.py writes one)",
    ("otel", "GpuFabricUnhealthy"): "no GPU here is on an NVLink fabric (NOT_SUPPORTED at "
                                    "probe; tests/integration/test_fabric.py runs a GB200 tray)",
    ("otel", "NVLink fabric"): "no GPU here is on an NVLink fabric",
}
for _name in ("GpuUnresponsive", "GpuAgentMissingCycles", "GpuAgentExportFailing",
              "GpuAgentEventsDropped", "GpuAgentEventsBacklog", "GpuNvlinkFailed",
              "GpuFabricUnhealthy"):
    NO_DATA_HERE[("dcgm", _name)] = NO_DATA_HERE[("otel", _name)]
# Faults on the node while every expression is run: each alert has its condition.
FAULTS = (
    {"op": "set", "device": 0, "values": {"ecc_dbe_volatile": 1, "remapped_rows_failure": 1}},
    {"op": "set", "device": 2, "values": {"temperature_c": 91, "clocks_event_reasons": 0x40,
                                          "nvlink.2.state": "down"}},
    {"op": "xid", "device": 1, "code": 48},
    {"op": "lost", "device": 3},
    {"op": "set", "device": 2, "values": {"nvlink.4.recovery_errors": 3}},
)
HEALED = (
    {"op": "set", "device": 0, "values": {"remapped_rows_failure": 0}},
    {"op": "set", "device": 2, "values": {"temperature_c": 50, "clocks_event_reasons": 1,
                                          "nvlink.2.state": "up"}},
    {"op": "recover", "device": 3},
)


def _substituted(expr: str) -> str:
    for name, value in sorted(VARIABLES.items(), key=lambda kv: -len(kv[0])):
        expr = expr.replace(name, value)
    return expr


def test_every_shipped_expression_returns_data_on_a_faulty_node_in_its_scheme(
        scenario: Scenario) -> None:
    """Every PromQL expression the project ships -- dashboard panels and variables (default
    scheme), alert and recording rules (both schemes, each in its own Prometheus), Prometheus
    Adapter rules (dcgm scheme) -- run on the scraped node with faults injected (ECC, a row
    remap failure, heat and thermal throttling, an NVLink link down, an XID, a lost GPU): each
    returns data, or is in NO_DATA_HERE with the reason it cannot here."""
    scenario.stack.wait_query("gpu_sm_utilization_ratio", bool)  # the slowest group is in
    scenario.stacks["dcgm"].wait_query('DCGM_CUSTOM_PROCESS_MEM_USED{PodName="rocm-a"}', bool,
                                       timeout=30)
    for command in FAULTS:
        assert scenario.node.command(command)["ok"], command
    try:
        queries = [("otel", *q) for q in _dashboard_queries()]
        queries += [(scheme, *q) for scheme, stack in scenario.stacks.items()
                    for q in _rule_queries(stack)]
        queries += [("dcgm", *q) for q in _adapter_queries()]
        assert len(queries) > 70
        # Alerts with a `for` (scaled to seconds) have had it once every expression answers.
        deadline = time.monotonic() + 40
        empty = ["?"]
        while empty and time.monotonic() < deadline:
            empty = []
            for scheme, source, name, expr in queries:
                if (scheme, name) in NO_DATA_HERE:
                    continue
                if not scenario.stacks[scheme].query(_substituted(expr)):  # valid PromQL
                    empty.append(f"{scheme}: {source} / {name}: {_substituted(expr)}")
            time.sleep(1)
        assert empty == [], "\n".join(empty)
        # The XID panels count a GPU's first XID of a code (its series appeared at 1, where
        # increase() alone sees nothing).
        xids = scenario.stack.query(_panel("gpu-cluster-overview.json", "XIDs (24 h)"))
        assert float(xids[0]["value"][1]) >= 1
        # The listed ones are listed for a reason that holds: still empty.
        for scheme, _source, name, expr in queries:
            if (scheme, name) in NO_DATA_HERE:
                assert scenario.stacks[scheme].query(_substituted(expr)) == [], (scheme, name)
    finally:
        for command in HEALED:
            scenario.node.command(command)


def _notified(stack: Stack, name: str, status: str, hw_id: str) -> bool:
    return any(a["labels"]["alertname"] == name and a["status"] == status
               and hw_id in (a["labels"].get("hw_id"), a["labels"].get("UUID"))
               for a in stack.webhook.alerts())


def test_the_xid_lost_and_throttle_alerts_fire_and_resolve_in_each_scheme(
        scenario: Scenario) -> None:
    """Through each scheme's own Prometheus and Alertmanager to its webhook: fired, then
    resolved once the GPU is back (the XID's window passed, the throttle lifted)."""
    scenario.node.command({"op": "xid", "device": 1, "code": 79})
    scenario.node.command({"op": "lost", "device": 3})
    scenario.node.command({"op": "set", "device": 2, "values": {"clocks_event_reasons": 0x8}})
    expected = (("GpuXidCritical", UUIDS[1]), ("GpuLost", UUIDS[3]),
                ("GpuClockThrottled", UUIDS[2]))
    try:
        for status in ("firing", "resolved"):
            deadline = time.monotonic() + 60
            missing = ["?"]
            while missing and time.monotonic() < deadline:
                missing = [f"{scheme} {name} {status}" for scheme, stack in scenario.stacks.items()
                           for name, gpu in expected
                           if not _notified(stack, name, status, gpu)]
                time.sleep(0.5)
            assert missing == [], [a["labels"] for s in scenario.stacks.values()
                                   for a in s.webhook.alerts()]
            if status == "firing":
                scenario.node.command({"op": "recover", "device": 3})
                scenario.node.command({"op": "set", "device": 2,
                                       "values": {"clocks_event_reasons": 1}})
    finally:
        scenario.node.command({"op": "recover", "device": 3})
        scenario.node.command({"op": "set", "device": 2, "values": {"clocks_event_reasons": 1}})
