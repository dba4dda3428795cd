"""MIG end to end: an A100 80GB in 3g.40gb + 2 x 1g.10gb next to a whole H100, on the simulated
node; pods in real cgroups holding MIG devices through a test kubelet (real pod-resources
protocol, both ``MIG-<uuid>`` and ``MIG-GPU-<uuid>/<gi>/<ci>`` ids); a real OTLP receiver and a
real Prometheus scraping two agents (``otel`` and ``dcgm`` schemes).

The reference for "what the node serves" is NVML itself: this test reads the same node through
pynvml (the simulated library), independently of the agent. The reconfiguration test runs last:
it changes the node.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pynvml
import pytest
import yaml

from gpu_otel_agent.simulation.node import SimulatedNode, attach_in_process
from gpu_otel_agent.simulation.node.control_client import SimCommandError
from gpu_otel_agent.workloads.pods import ContainerAllocation, ContainerDevices, PodAllocation
from tests.integration.cgroups import Pod, cgroups, v1_root, v2_root
from tests.integration.conftest import UUIDS
from tests.integration.exports import select, wait_export
from tests.integration.harness import REPO, AgentProcess, h100, write_scenario
from tests.integration.prometheus_stack import Stack, binaries_missing
from tests.receivers.kubelet import FakeKubelet
from tests.receivers.netutil import free_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import Point

pytestmark = pytest.mark.integration
MIB = 1024 * 1024
A100 = UUIDS[0]
H100 = UUIDS[1]
INSTANCE_USED_MIB = (20000, 5000, 0)
DASHBOARDS = REPO / "otel-config" / "dashboards"


@dataclass(frozen=True)
class Instance:
    uuid: str
    profile: str
    gi: int
    ci: int
    total: int  # bytes, as NVML serves them
    used: int


@dataclass
class Mig:
    node: SimulatedNode
    receiver: OtlpGrpcReceiver
    stack: Stack
    agents: dict[str, AgentProcess]
    pods: dict[str, Pod]
    pids: dict[str, int]
    instances: list[Instance]  # the node's, read through NVML before the agents started


def _nvml_instances(index: int) -> list[Instance]:
    """GPU ``index``'s MIG devices, read through pynvml on the simulated library."""
    parent = pynvml.nvmlDeviceGetHandleByIndex(index)
    found = []
    for i in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(parent)):
        try:
            handle = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, i)
        except pynvml.NVMLError_NotFound:
            continue  # an empty index: the next may hold one (go-nvlib VisitMigDevices)
        name = pynvml.nvmlDeviceGetName(handle)
        memory = pynvml.nvmlDeviceGetMemoryInfo(handle)
        found.append(Instance(pynvml.nvmlDeviceGetUUID(handle), name.rsplit(" MIG ", 1)[1],
                              pynvml.nvmlDeviceGetGpuInstanceId(handle),
                              pynvml.nvmlDeviceGetComputeInstanceId(handle),
                              int(memory.total), int(memory.used)))
    return found


def _agent(workdir: Path, node: SimulatedNode, receiver: OtlpGrpcReceiver, *, scheme: str,
           port: int, kubelet: Path) -> AgentProcess:
    config = workdir / f"agent-{scheme}.yaml"
    config.write_text(yaml.safe_dump({
        "groups": {"slow": {"interval": 1.0}, "gpm": {"interval": 1.0},
                   "processes": {"interval": 0.5}},
        "prometheus": {"enabled": True, "listen": f"127.0.0.1:{port}", "scheme": scheme},
        "attribution": {"reconcile_interval": 1,
                        "kubelet": {"socket": str(kubelet), "refresh_interval": 1}},
        # One agent reports events, so each event reaches the receiver once.
        "health": {"enabled": scheme == "otel", "kmsg": False},
    }), encoding="utf-8")
    return AgentProcess(workdir, receiver.endpoint, node.env,
                         ["--interval", "0.5", "--export-interval", "0.5", "--config",
                          str(config)], env={"K8S_NODE_NAME": "gpu-node-a"}).serving(port)


@pytest.fixture(scope="module")
def mig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Mig]:
    missing = binaries_missing()
    if missing:
        pytest.skip(missing)
    workdir = tmp_path_factory.mktemp("mig")
    a100 = {"model": "NVIDIA A100-SXM4-80GB", "uuid": A100, "power_w": 250,
            "mig": [{"profile": "3g.40gb", "memory_used_mib": INSTANCE_USED_MIB[0]},
                    {"profile": "1g.10gb", "memory_used_mib": INSTANCE_USED_MIB[1]},
                    {"profile": "1g.10gb", "memory_used_mib": INSTANCE_USED_MIB[2]}]}
    scenario = write_scenario(workdir, {"driver_version": "580.95.05",
                                        "devices": [a100, h100(1, uuid=H100)]})
    agents: dict[str, AgentProcess] = {}
    with SimulatedNode.start(scenario, state_dir=workdir / "node") as node, \
            OtlpGrpcReceiver() as receiver, cgroups() as groups, \
            FakeKubelet(workdir / "kubelet" / "kubelet.sock") as kubelet:
        attach_in_process(node)
        pynvml.nvmlInit()
        instances = _nvml_instances(0)
        base = v2_root() or v1_root("pids")
        assert base is not None, "no cgroup hierarchy"
        # No HOSTNAME in the processes: each pod is found by the MIG device it was allocated.
        pods = {name: groups.pod(base, name) for name in ("big", "small")}
        pids = {name: groups.spawn(pod.cgroup) for name, pod in pods.items()}
        for name, position, memory in (("big", 0, 12000), ("small", 1, 3000)):
            answer = node.command({"op": "proc_add", "device": 0, "pid": pids[name],
                                   "mig": position, "used_memory_mib": memory})
            assert answer["ok"], answer
        big, small = instances[0], instances[1]
        kubelet.set_pods([
            PodAllocation("ml", "big", (ContainerAllocation("main", (ContainerDevices(
                "nvidia.com/mig-3g.40gb", (big.uuid,)),)),)),
            # The older id form: MIG-GPU-<parent uuid>/<gpu instance>/<compute instance>.
            PodAllocation("ml", "small", (ContainerAllocation("main", (ContainerDevices(
                "nvidia.com/mig-1g.10gb", (f"MIG-{A100}/{small.gi}/{small.ci}",)),)),)),
        ])
        try:
            ports = {scheme: free_port() for scheme in ("otel", "dcgm")}
            for scheme, port in ports.items():
                agents[scheme] = _agent(workdir, node, receiver, scheme=scheme, port=port,
                                        kubelet=kubelet.socket_path)
            stack = Stack(workdir, {f"gpu-agent-{s}": f"127.0.0.1:{p}" for s, p in ports.items()},
                          [])
            try:
                yield Mig(node, receiver, stack, agents, pods, pids, instances)
            finally:
                stack.close()
        finally:
            for agent in agents.values():
                agent.close()
            pynvml.nvmlShutdown()


def _instance_points(points: list[Point], metric: str) -> dict[str, Point]:
    return {str(p.attributes["hw.id"]): p for p in select(points, metric, hw__parent=A100)}


def test_the_node_serves_the_scenarios_instances(mig: Mig) -> None:
    assert [(i.profile, i.used // MIB) for i in mig.instances] == [
        ("3g.40gb", 20000), ("1g.10gb", 5000), ("1g.10gb", 0)]
    assert len({i.gi for i in mig.instances}) == 3
    assert all(re.fullmatch(r"MIG-[0-9a-f-]{36}", i.uuid) for i in mig.instances)
    parent = pynvml.nvmlDeviceGetHandleByIndex(0)
    with pytest.raises(pynvml.NVMLError_NotSupported):  # nvml.h: not on MIG-enabled GPUs
        pynvml.nvmlDeviceGetUtilizationRates(parent)
    handle = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, 0)
    with pytest.raises(pynvml.NVMLError_NotSupported):  # physical: the parent's
        pynvml.nvmlDeviceGetPowerUsage(handle)


def test_each_instance_is_a_device_with_the_values_the_node_serves(mig: Mig) -> None:
    def complete(points: list[Point]) -> bool:
        return (len(_instance_points(points, "hw.gpu.memory.usage")) == 3
                and bool(select(points, "hw.power", hw__id=A100)))

    points = wait_export(mig.receiver.store, complete, "the A100's three instances")
    usage = _instance_points(points, "hw.gpu.memory.usage")
    limit = _instance_points(points, "hw.gpu.memory.limit")
    for instance in mig.instances:
        attributes = usage[instance.uuid].attributes
        assert attributes["hw.parent"] == A100
        assert attributes["gpu.index"] == 0
        assert attributes["hw.model"] == "NVIDIA A100-SXM4-80GB"
        assert attributes["gpu.mig.profile"] == instance.profile
        assert attributes["gpu.mig.gpu_instance.id"] == instance.gi
        assert attributes["gpu.mig.compute_instance.id"] == instance.ci
        assert usage[instance.uuid].value == instance.used
        assert limit[instance.uuid].value == instance.total
    # The parent keeps what is physical; NVML serves it no utilization in MIG mode.
    assert select(points, "hw.power", hw__id=A100)[0].value == pytest.approx(250)
    assert not select(points, "hw.gpu.utilization", hw__id=A100)
    assert not [p for p in points if p.attributes.get("hw.parent") and p.metric == "hw.power"]
    # The whole H100 next to it is a device as before: no parent, no MIG attributes.
    (h100_util,) = select(points, "hw.gpu.utilization", hw__id=H100, hw__gpu__task="general")
    assert "hw.parent" not in h100_util.attributes


def test_a_process_per_instance_is_attributed_to_the_pod_holding_it(mig: Mig) -> None:
    big, small = mig.instances[0], mig.instances[1]

    def named(points: list[Point]) -> bool:
        return len(select(points, "gpu.container.memory.limit")) == 2

    points = wait_export(mig.receiver.store, named, "both pods' instance memory limits")
    for pod, instance, memory in (("big", big, 12000), ("small", small, 3000)):
        (process,) = select(points, "gpu.process.memory.usage", process__pid=mig.pids[pod])
        assert process.attributes["hw.id"] == instance.uuid
        assert process.attributes["k8s.pod.name"] == pod
        assert process.attributes["k8s.pod.uid"] == mig.pods[pod].uid
        assert process.value == memory * MIB
        (limit,) = select(points, "gpu.container.memory.limit", k8s__pod__name=pod)
        assert limit.attributes["hw.id"] == instance.uuid
        assert limit.value == instance.total  # the instance's memory, not the GPU's
    # The parent lists no process of its instances (no double counting).
    assert not select(points, "gpu.process.memory.usage", hw__id=A100)


def test_prometheus_otel_scheme_has_the_instances_with_their_parent(mig: Mig) -> None:
    result = mig.stack.wait_query(
        f'hw_gpu_memory_usage_bytes{{job="gpu-agent-otel",hw_parent="{A100}"}}',
        lambda r: len(r) == 3)
    by_uuid = {r["metric"]["hw_id"]: r for r in result}
    for instance in mig.instances:
        metric = by_uuid[instance.uuid]["metric"]
        assert metric["gpu_mig_profile"] == instance.profile
        assert metric["gpu_mig_gpu_instance_id"] == str(instance.gi)
        assert float(by_uuid[instance.uuid]["value"][1]) == instance.used


def test_prometheus_dcgm_scheme_labels_instances_as_dcgm_exporter_does(mig: Mig) -> None:
    result = mig.stack.wait_query(
        'DCGM_FI_DEV_FB_USED{job="gpu-agent-dcgm",GPU_I_PROFILE!=""}', lambda r: len(r) >= 3)
    by_id = {r["metric"]["GPU_I_ID"]: r for r in result}
    for instance in mig.instances:
        found = by_id[str(instance.gi)]
        assert found["metric"]["UUID"] == A100  # the GPU's UUID, as dcgm-exporter sets it
        assert found["metric"]["gpu"] == "0"
        assert found["metric"]["GPU_I_PROFILE"] == instance.profile
        assert float(found["value"][1]) == instance.used / MIB
    # A per-pod panel on a MIG node shows each pod's instance.
    pods = mig.stack.wait_query(
        'DCGM_FI_DEV_FB_USED{job="gpu-agent-dcgm",pod!=""}', lambda r: len(r) == 2)
    assert {r["metric"]["pod"]: r["metric"]["GPU_I_PROFILE"] for r in pods} == {
        "big": "3g.40gb", "small": "1g.10gb"}


def _xid_event(mig: Mig, code: int, what: str) -> Any:
    return mig.receiver.store.wait_for(
        lambda s: s.logs("gpu.xid", {"gpu.xid.code": code}), timeout=20, what=what)[0]


def test_an_instance_scoped_xid_names_the_instance_and_its_pod(mig: Mig) -> None:
    wait_export(mig.receiver.store,
                lambda points: len(select(points, "gpu.container.memory.limit")) == 2,
                "attribution in place")
    answer = mig.node.command({"op": "xid", "device": 0, "code": 43, "mig": 1})
    assert answer["ok"] and answer["gpu_instance_id"] == mig.instances[1].gi
    event = _xid_event(mig, 43, "the instance's XID 43")
    assert event.attributes["hw.id"] == mig.instances[1].uuid
    assert event.attributes["hw.parent"] == A100
    assert event.attributes["gpu.mig.profile"] == "1g.10gb"
    assert event.attributes["k8s.pod.name"] == "small"
    # The count stays with the physical GPU.
    mig.receiver.store.wait_for(
        lambda s: s.latest("gpu.xid.errors", {"hw.id": A100, "gpu.xid.code": 43}),
        timeout=20, what="XID 43 counted on the A100")


def test_an_xid_on_the_parent_names_the_pods_on_every_instance(mig: Mig) -> None:
    # 13, not 79: after 79 the A100 would be lost (off the bus) for this module's later tests.
    assert mig.node.command({"op": "xid", "device": 0, "code": 13})["ok"]
    event = _xid_event(mig, 13, "the parent's XID 13")
    assert event.attributes["hw.id"] == A100
    assert "hw.parent" not in event.attributes
    # One record per process, each with its own pod; the records share the event's id.
    records = mig.receiver.store.wait_for(
        lambda s: len(r := [x for x in s.logs("gpu.xid", {"gpu.xid.code": 13})
                            if x.attributes["gpu.event.id"] == event.attributes["gpu.event.id"]])
        >= 2 and r, timeout=20, what="both records of XID 13")
    assert sorted(str(r.attributes["k8s.pod.name"]) for r in records) == ["big", "small"]
    assert len({r.attributes["log.record.uid"] for r in records}) == len(records)


def _panel_query(dashboard: str, title: str) -> str:
    panels = json.loads((DASHBOARDS / f"{dashboard}.json").read_text())["panels"]
    (expr,) = [t["expr"] for p in panels if p.get("title") == title for t in p["targets"]]
    for name, value in {"$namespace": "ml", "$pod": ".*", "$node": "gpu-node-a"}.items():
        expr = expr.replace(name, value)
    return str(expr)


def test_the_shipped_dashboards_show_each_pods_instance_and_count_gpus_once(mig: Mig) -> None:
    per_pod = mig.stack.wait_query(_panel_query("gpu-pods", "GPU memory per pod"),
                                   lambda r: len(r) == 2)
    assert {r["metric"]["k8s_pod_name"]: r["metric"]["gpu_mig_profile"] for r in per_pod} == {
        "big": "3g.40gb", "small": "1g.10gb"}
    gpus = mig.stack.wait_query(_panel_query("gpu-cluster-overview", "GPUs"),
                                bool)
    assert float(gpus[0]["value"][1]) == 2  # the A100 and the H100, not their instances


def test_reconfiguration_at_run_time_without_restart_or_errors(mig: Mig) -> None:
    store = mig.receiver.store
    idle = mig.instances[2]
    stale = pynvml.nvmlDeviceGetHandleByUUID(idle.uuid)
    # Destroying an instance a process runs on is refused (NVML_ERROR_IN_USE); nothing changes.
    with pytest.raises(SimCommandError, match="NVML_ERROR_IN_USE"):
        mig.node.command({"op": "mig", "device": 0, "set": "3g.40gb,2g.20gb"})
    # Destroy the idle 1g.10gb, create a 2g.20gb; the busy instances stay.
    answer = mig.node.command({"op": "mig", "device": 0, "set": "3g.40gb,1g.10gb,2g.20gb"})
    assert answer["ok"], answer
    created = {i["uuid"] for i in answer["instances"]} - {i.uuid for i in mig.instances}
    assert len(created) == 1
    (new,) = created
    # "Handles may be reused and their properties can change" (nvml.h): the destroyed
    # instance's handle now names the new one, which is why instances are told apart by UUID.
    assert pynvml.nvmlDeviceGetUUID(stale) == new

    def reconfigured(points: list[Point]) -> bool:
        usage = _instance_points(points, "hw.gpu.memory.usage")
        return idle.uuid not in usage and new in usage and len(usage) == 3

    points = wait_export(store, reconfigured, "the new instance in, the destroyed one out")
    (limit,) = select(points, "hw.gpu.memory.limit", hw__id=new)
    assert limit.attributes["gpu.mig.profile"] == "2g.20gb"
    assert limit.value == pynvml.nvmlDeviceGetMemoryInfo(
        pynvml.nvmlDeviceGetHandleByUUID(new)).total
    for agent in mig.agents.values():
        # Seen by each running agent (no restart): the dcgm one on its next partition scan.
        deadline = time.monotonic() + 20
        while f"partition {new} appeared" not in agent.log():
            assert agent.process.poll() is None, agent.log()[-3000:]
            assert time.monotonic() < deadline, agent.log()[-3000:]
            time.sleep(0.1)
        log = agent.log()
        assert f"partition {idle.uuid} is gone" in log
        assert "Traceback" not in log and " failed" not in log, log[-3000:]
    result = mig.stack.wait_query(
        'DCGM_FI_DEV_FB_USED{job="gpu-agent-dcgm",GPU_I_PROFILE="2g.20gb"}',
        lambda r: len(r) == 1)
    assert result[0]["metric"]["UUID"] == A100
