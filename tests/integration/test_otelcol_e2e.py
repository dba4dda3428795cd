"""The whole push path on real components: the agent on the simulated node -> the collector
built from otel-config/otelcol-builder.yaml running the shipped gateway.yaml -> Prometheus 3's
own OTLP receiver (the stand-in for Mimir's OTLP endpoint: the same translator), with the
shipped alert and recording rules and a real Alertmanager; and the gateway's health-event
pipeline -> a second built collector running the shipped local.yaml -> its file exporter.

The node and its pods are the scrape test's (tests/integration/test_prometheus_scrape.py:
four H100s with pods in real cgroups, a MIG A100, a CPX MI300X), and so are the faults and
the expressions known to stay empty there, so both paths are held to the same list. The
agent's own pod is a host-network pod (the chart's hostNetwork: true) known to a Kubernetes
API on loopback; the gateway's k8s_attributes must find it by its UID.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import json_format
from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from gpu_otel_agent.gpu_health.xid import lookup
from gpu_otel_agent.simulation.node import SimulatedNode
from tests.integration.cgroups import Pod, cgroups
from tests.integration.conftest import UUIDS
from tests.integration.harness import REPO, AgentProcess, write_scenario
from tests.integration.otelcol import (
    CONFIGS,
    Collector,
    collector_binary,
    go_missing,
    prometheus3_binary,
)
from tests.integration.prometheus_stack import Stack, binaries_missing
from tests.integration.test_prometheus_scrape import (
    FAULTS,
    HEALED,
    MEMORY_RESOURCE,
    MIB,
    NO_DATA_HERE,
    NODE,
    USED_MIB,
    UTIL,
    _dashboard_queries,
    _pods,
    _substituted,
    faulty_node_devices,
)
from tests.receivers.kube_api import KubeApi, pod
from tests.receivers.kubelet import FakeKubelet
from tests.receivers.netutil import free_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver

pytestmark = pytest.mark.integration

RULE_FILES = (sorted((REPO / "otel-config" / "alerts").glob("*.rules.yaml"))
              + sorted((REPO / "helm" / "gpu-otel-agent" / "files").glob("*.rules.yaml")))
AGENT_POD_UID = "0b7f4c1e-5a53-4b8e-9d0c-6f0e3c2a9b11"
CLUSTER = "e2e-cluster"
# Series the default (otel) scheme has only on the scrape path, never through OTLP, and why.
# Anything else that is empty through the collector fails the test.
NO_DATA_THROUGH_OTLP: dict[str, str] = {}
H100S = 'hw_id=~"' + "|".join(UUIDS[:4]) + '"'


@dataclass
class Pipeline:
    node: SimulatedNode
    stack: Stack
    agent: AgentProcess
    gateway: Collector
    local: Collector
    kube_api: KubeApi
    events_file: Path
    pods: dict[str, Pod]


# Rules on a faster clock, as in the scrape test: `for` and `keep_firing_for` minutes read as
# seconds; range windows and offsets a minute as WINDOW_S seconds. Not 1 s as there: the
# gateway flushes its batches every 5 s (the shipped sending_queue.batch.flush_timeout), and a
# window must stay well longer than that delivery delay, as 5 minutes are in real time (a
# series that appears is 5 s old when Prometheus gets it: `x unless x offset 5s` would never
# hold). Not much longer either: the agent-health rules' windows would gather a loaded
# machine's transient misses for longer than the scrape test's do.
WINDOW_S = 6


def _windows_scaled(expr: str) -> str:
    expr = re.sub(r"\[(\d+)m\]", lambda m: f"[{int(m.group(1)) * WINDOW_S}s]", expr)
    return re.sub(r"offset (\d+)m\b", lambda m: f"offset {int(m.group(1)) * WINDOW_S}s", expr)


def _scaled(path: Path, workdir: Path) -> Path:
    """A rule file on the faster clock; the file's group names get the file's own prefix
    (two files, one Prometheus)."""
    text = path.read_text(encoding="utf-8")
    text = re.sub(r"(for|keep_firing_for): (\d+)m\b", r"\1: \2s", text)
    rules = yaml.safe_load(_windows_scaled(text))
    for group in rules["groups"]:
        group["name"] = f"{path.parent.name}/{group['name']}"
    out = workdir / f"{path.parent.name}-{path.name}"
    out.write_text(yaml.safe_dump(rules), encoding="utf-8")
    return out


def _rule_queries() -> list[tuple[str, str, str]]:
    """(file, rule name, PromQL) of every alert and recording rule, scaled as loaded."""
    out = []
    for path in RULE_FILES:
        for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]:
            for rule in group["rules"]:
                out.append((str(path.relative_to(REPO)), rule.get("alert") or rule["record"],
                            _windows_scaled(rule["expr"])))
    return out


def _alerts() -> set[str]:
    return {rule["alert"] for path in RULE_FILES
            for group in yaml.safe_load(path.read_text(encoding="utf-8"))["groups"]
            for rule in group["rules"] if "alert" in rule}


def _agent_pod() -> dict[str, Any]:
    """The agent's pod as the chart deploys it: host network, owned by the DaemonSet."""
    return pod("gpu-otel-agent-x7k2p", "monitoring", AGENT_POD_UID, node=NODE, ip="127.0.0.1",
               host_network=True, labels={"app.kubernetes.io/instance": "gpu",
                                          "app.kubernetes.io/name": "gpu-otel-agent"},
               owner=("DaemonSet", "gpu-otel-agent"))


def _ports(*names: str) -> dict[str, str]:
    return {name: str(free_port()) for name in names}


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pipeline]:
    if missing := go_missing() or binaries_missing():
        pytest.skip(missing)
    collector_binary()  # built (or found in the cache) before any process starts
    prometheus = prometheus3_binary()
    workdir = tmp_path_factory.mktemp("otelcol-e2e")
    scenario = write_scenario(workdir, {"driver_version": "580.95.05",
                                        "amd_driver_version": "6.10.5",
                                        "devices": faulty_node_devices()})
    closers: list[Any] = []
    with SimulatedNode.start(scenario, state_dir=workdir / "node") as node, \
            cgroups() as groups, FakeKubelet(workdir / "kubelet" / "kubelet.sock") as kubelet, \
            KubeApi([_agent_pod()]) as kube_api, OtlpGrpcReceiver() as tempo:
        try:
            pods = _pods(groups, node, kubelet)
            home = workdir / "prometheus"
            home.mkdir()
            stack = Stack(home, {}, [_scaled(p, workdir) for p in RULE_FILES],
                          prometheus=str(prometheus),
                          prometheus_args=["--web.enable-otlp-receiver"])
            closers.append(stack.close)
            events_file = workdir / "events.jsonl"
            local_env = {"LISTEN_ADDRESS": "127.0.0.1", "EVENTS_FILE": str(events_file),
                         **_ports("OTLP_GRPC_PORT", "OTLP_HTTP_PORT", "TELEMETRY_PORT")}
            local = Collector(workdir, [CONFIGS / "local.yaml"], local_env, "local")
            closers.append(local.close)
            local.wait_ready()
            gateway_env = {
                "LISTEN_ADDRESS": "127.0.0.1",
                **_ports("OTLP_GRPC_PORT", "OTLP_HTTP_PORT", "HEALTH_CHECK_PORT",
                         "TELEMETRY_PORT"),
                "MIMIR_OTLP_ENDPOINT": f"{stack.prometheus}/api/v1/otlp",
                "LOKI_OTLP_ENDPOINT": f"http://127.0.0.1:{local_env['OTLP_HTTP_PORT']}",
                "TEMPO_OTLP_ENDPOINT": tempo.address, "TEMPO_INSECURE": "true",
                "TENANT": "gpu-e2e", "CLUSTER_NAME": CLUSTER,
                "QUEUE_DIRECTORY": str(workdir / "queue"),
                "K8S_AUTH_TYPE": "kubeConfig",
                "KUBECONFIG": str(kube_api.kubeconfig(workdir / "kubeconfig")),
            }
            gateway = Collector(workdir, [CONFIGS / "gateway.yaml"], gateway_env, "gateway")
            closers.append(gateway.close)
            gateway.wait_ready()
            config = workdir / "agent.yaml"
            config.write_text(yaml.safe_dump({
                "groups": {"slow": {"interval": 1.0}, "gpm": {"interval": 1.0},
                           "processes": {"interval": 0.5}},
                "lost_reprobe_interval": 1.0,
                "attribution": {"reconcile_interval": 1,
                                "memory_resources": {MEMORY_RESOURCE: MIB},
                                "kubelet": {"socket": str(kubelet.socket_path),
                                            "refresh_interval": 1}},
            }), encoding="utf-8")
            agent = AgentProcess(
                workdir, f"http://127.0.0.1:{gateway_env['OTLP_GRPC_PORT']}", node.env,
                ["--interval", "0.5", "--export-interval", "1", "--config", str(config),
                 "--log-level", "warning"],
                # As the chart sets them (the Downward API's pod IP and UID).
                env={"K8S_NODE_NAME": NODE, "OTEL_RESOURCE_ATTRIBUTES":
                     f"k8s.pod.ip=127.0.0.1,k8s.pod.uid={AGENT_POD_UID}"})
            closers.append(agent.close)
            yield Pipeline(node, stack, agent, gateway, local, kube_api, events_file, pods)
        finally:
            for close in reversed(closers):
                close()


def _values(result: list[dict[str, Any]], label: str) -> dict[str, float]:
    return {r["metric"].get(label, ""): float(r["value"][1]) for r in result}


def test_values_arrive_in_prometheus_through_the_collector(pipeline: Pipeline) -> None:
    """The simulated values, under the names the scrape path has, and the agent's resource
    as target_info, with what the gateway added: its node, DaemonSet and release label found
    by the agent pod's UID (a host-network pod), the cluster; the UID itself removed."""
    stack = pipeline.stack
    query = f'hw_gpu_utilization_ratio{{hw_gpu_task="general",{H100S}}}'
    result = stack.wait_query(query, lambda r: len(r) == 4, timeout=90)
    assert _values(result, "hw_id") == {UUIDS[i]: UTIL[i] / 100 for i in range(4)}
    used = _values(stack.query(f"hw_gpu_memory_usage_bytes{{{H100S}}}"), "hw_id")
    assert used == {UUIDS[i]: USED_MIB[i] * MIB for i in range(4)}
    (info,) = stack.wait_query('target_info{k8s_daemonset_name!=""}', bool, timeout=60)
    labels = info["metric"]
    assert labels["job"] == "gpu-otel-agent"  # service.name, as the OTLP translator maps it
    assert labels["k8s_node_name"] == NODE
    assert labels["k8s_daemonset_name"] == "gpu-otel-agent"
    assert labels["app_kubernetes_io_instance"] == "gpu"
    assert labels["k8s_cluster_name"] == CLUSTER
    assert "k8s_pod_uid" not in labels
    assert stack.query('target_info{k8s_daemonset_name=""}') == []


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _records(path: Path) -> list[dict[str, Any]]:
    """Every log record the file exporter wrote: its resource, severity and attributes."""
    out = []
    if not path.exists():
        return out
    for line in path.read_text(encoding="utf-8").splitlines():
        request = json_format.Parse(line, ExportLogsServiceRequest())
        for resource_logs in request.resource_logs:
            resource = {a.key: _value(a.value) for a in resource_logs.resource.attributes}
            for scope_logs in resource_logs.scope_logs:
                for record in scope_logs.log_records:
                    out.append({"resource": resource, "event_name": record.event_name,
                                "severity_number": record.severity_number,
                                "severity_text": record.severity_text,
                                "body": _value(record.body),
                                "attributes": {a.key: _value(a.value)
                                               for a in record.attributes}})
    return out


def test_an_xid_arrives_as_one_record_per_process_sharing_the_event_id(
        pipeline: Pipeline) -> None:
    """XID 48 on the H100 where pod infer-a runs two processes: through the gateway's
    health-event pipeline (filter, k8s_attributes, resource) to the file exporter of a second
    collector, two records, one per process, with one gpu.event.id, each record's own
    log.record.uid, the XID catalog's severity, the pod's attributes and the pids the node
    runs; the resource carries what the gateway added."""
    infer_a = pipeline.pods["infer-a"]
    pids = {int(p) for p in (infer_a.cgroup / "cgroup.procs").read_text().split()}
    assert len(pids) == 2  # the two processes the scrape test's node runs for infer-a
    assert pipeline.node.command({"op": "xid", "device": 0, "code": 48})["ok"]

    def xid_records() -> list[dict[str, Any]]:
        return [r for r in _records(pipeline.events_file)
                if r["attributes"].get("event.name") == "gpu.xid"
                and r["attributes"].get("hw.id") == UUIDS[0]
                and r["attributes"].get("gpu.xid.code") == 48]

    deadline = time.monotonic() + 90
    records = xid_records()
    while len(records) < 2 and time.monotonic() < deadline:
        time.sleep(0.5)
        records = xid_records()
    assert len(records) == 2, _records(pipeline.events_file)
    info = lookup(48)
    event_ids = {r["attributes"]["gpu.event.id"] for r in records}
    assert len(event_ids) == 1
    uids = {r["attributes"]["log.record.uid"] for r in records}
    assert len(uids) == 2 and event_ids <= uids  # the first record's uid is the event's id
    for record in records:
        attributes = record["attributes"]
        assert record["event_name"] == "gpu.xid"
        assert (record["severity_number"], record["severity_text"]) == (
            info.severity.number, info.severity.text)
        assert record["severity_number"] == 17  # ERROR in the OTLP logs data model
        assert attributes["gpu.xid.name"] == info.name
        assert attributes["gpu.xid.action"] == info.action
        assert attributes["k8s.pod.name"] == "infer-a"
        assert attributes["k8s.namespace.name"] == infer_a.namespace
        assert attributes["k8s.pod.uid"] == infer_a.uid
        assert isinstance(attributes["process.pid"], int)
        resource = record["resource"]
        assert resource["service.name"] == "gpu-otel-agent"
        assert resource["k8s.cluster.name"] == CLUSTER
        assert resource["k8s.daemonset.name"] == "gpu-otel-agent"
        assert "k8s.pod.uid" not in resource  # the agent pod's: used, then dropped
    assert {r["attributes"]["process.pid"] for r in records} == pids
    # Only health events pass the gateway's filter: every record is one.
    names = {r["attributes"].get("event.name") for r in _records(pipeline.events_file)}
    assert names and all(str(n).startswith("gpu.") for n in names)


def _all_queries() -> list[tuple[str, str, str]]:
    return [*_dashboard_queries(), *_rule_queries()]


def _listed(name: str) -> str | None:
    return NO_DATA_HERE.get(("otel", name)) or NO_DATA_THROUGH_OTLP.get(name)


def test_every_shipped_expression_returns_data_through_the_collector_and_alerts_fire(
        pipeline: Pipeline) -> None:
    """Every dashboard panel and variable and every alert and recording rule (read from the
    files), on the data that came through the collector with the scrape test's faults on the
    node: each returns data at some evaluation, or is listed with the reason it cannot here
    (and then returns nothing once the alerts fired); each alert that can fire here reaches
    the Alertmanager as firing. Deadlines are generous: the machine may be loaded."""
    stack = pipeline.stack
    stack.wait_query("gpu_sm_utilization_ratio", bool, timeout=90)  # the slowest group
    queries = _all_queries()
    assert len(queries) > 50
    for command in FAULTS:
        assert pipeline.node.command(command)["ok"], command
    try:
        answered: set[tuple[str, str]] = set()
        # Points come in the gateway's batches (flushed every 5 s): an expression over a
        # short window may be empty at one evaluation and not at the next.
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            for source, name, expr in queries:
                if (source, name) in answered or _listed(name):
                    continue
                if stack.query(_substituted(expr)):
                    answered.add((source, name))
            if all((s, n) in answered for s, n, _ in queries if not _listed(n)):
                break
            time.sleep(1)
        empty = [f"{s} / {n}: {_substituted(e)}" for s, n, e in queries
                 if (s, n) not in answered and not _listed(n)]
        assert empty == [], "\n".join(empty)
        firing = {name for name in _alerts() if not _listed(name)}
        deadline = time.monotonic() + 180
        missing = firing
        while missing and time.monotonic() < deadline:
            notified = {a["labels"]["alertname"] for a in stack.webhook.alerts()
                        if a["status"] == "firing"}
            missing = firing - notified
            time.sleep(1)
        assert missing == set(), stack.webhook.alerts()
        # The listed ones are listed for a reason that holds: still empty, now that the
        # alerts had their time (as the scrape test checks them).
        listed_with_data = [(source, name) for source, name, expr in queries
                            if _listed(name) and stack.query(_substituted(expr))]
        assert listed_with_data == []
        # The lost GPU's withdrawn series ended (the agent's "no recorded value" point, a
        # staleness marker here): GpuLost fired above, as on the scrape path.
        lost = f'hw_id="{UUIDS[3]}"'
        assert stack.query(f'hw_status{{hw_state="failed",{lost}}} == 1')
        assert stack.query(f"hw_power_watts{{{lost}}}") == []
    finally:
        for command in HEALED:
            pipeline.node.command(command)


def test_the_node_variable_lists_the_node_through_the_collector(pipeline: Pipeline) -> None:
    """The dashboards' node dropdown: on the OTLP path service.name becomes job (and is not
    a label of target_info), so a selector on service_name alone finds nothing there."""
    pipeline.stack.wait_query("target_info", bool, timeout=60)
    variables = [(b, q) for b, t, q in _dashboard_queries() if t == "variable node"]
    assert variables
    for board, query in variables:
        result = pipeline.stack.query(_substituted(query))
        assert {r["metric"].get("k8s_node_name") for r in result} == {NODE}, board


def test_the_event_file_is_json_lines_of_otlp(pipeline: Pipeline) -> None:
    """The file exporter's format, as local.yaml documents it: one OTLP/JSON request a line."""
    lines = pipeline.events_file.read_text(encoding="utf-8").splitlines()
    assert lines
    for line in lines:
        assert "resourceLogs" in json.loads(line)
