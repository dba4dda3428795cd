"""The agent on MIG as real GPUs lay it out (issue 28): MIG device indices with holes, GPU
instance ids that follow placement, a GPU instance with two compute instances (two MIG devices
sharing its memory), processes and pods on each compute instance, an XID naming a compute
instance, and transient NVML errors during MIG scans and GPM probes.

What the node serves is read back through pynvml (the simulated library), independently of the
agent; what the agent says arrives at a real OTLP receiver.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from gpu_otel_agent.simulation.node import SimulatedNode
from gpu_otel_agent.workloads.pods import ContainerAllocation, ContainerDevices, PodAllocation
from tests.integration.cgroups import cgroups, v1_root, v2_root
from tests.integration.conftest import UUIDS
from tests.integration.exports import select, wait_export
from tests.integration.harness import AgentProcess, write_scenario
from tests.receivers.kubelet import FakeKubelet
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import Point
from tests.unit.simulator.simhelpers import run_client

pytestmark = pytest.mark.integration
MIB = 1024 * 1024
A100 = UUIDS[0]
H100 = UUIDS[1]
GI_USED_MIB = 20000


@dataclass(frozen=True)
class MigDevice:
    index: int
    uuid: str
    gi: int
    ci: int
    total: int
    used: int


def _nvml_mig_devices(node: SimulatedNode, parent_index: int) -> dict[int, MigDevice]:
    """The MIG devices of a GPU, read through pynvml in a client process (this one may be
    attached to another node) as go-nvlib's VisitMigDevices does: every index."""
    rows = run_client(node, f"""
parent = h[{parent_index}]
out = []
for i in range(N.nvmlDeviceGetMaxMigDeviceCount(parent)):
    try:
        m = N.nvmlDeviceGetMigDeviceHandleByIndex(parent, i)
    except N.NVMLError_NotFound:
        continue
    memory = N.nvmlDeviceGetMemoryInfo(m)
    out.append([i, N.nvmlDeviceGetUUID(m), N.nvmlDeviceGetGpuInstanceId(m),
                N.nvmlDeviceGetComputeInstanceId(m), memory.total, memory.used])
""")
    return {int(row[0]): MigDevice(*row) for row in rows}


@dataclass
class Layout:
    node: SimulatedNode
    receiver: OtlpGrpcReceiver
    agent: AgentProcess
    migs: dict[int, MigDevice]  # of the A100, by MIG device index
    h100_migs: dict[int, MigDevice]
    pids: dict[str, int]


@pytest.fixture(scope="module")
def layout(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Layout]:
    workdir = tmp_path_factory.mktemp("miglayout")
    a100 = {"model": "NVIDIA A100-SXM4-80GB", "uuid": A100, "mig": [
        # Index 0 stays empty (a hole); ids as a real A100 places them (DCGM issue #138).
        {"profile": "3g.40gb", "gpu_instance_id": 2, "memory_used_mib": GI_USED_MIB,
         "compute_instances": [{"profile": "1c.3g.40gb", "mig_index": 1},
                               {"profile": "2c.3g.40gb", "mig_index": 2}]},
        {"profile": "1g.10gb", "gpu_instance_id": 13, "mig_index": 5, "memory_used_mib": 1000},
    ]}
    h100 = {"model": "NVIDIA H100 80GB HBM3", "uuid": H100, "mig": [
        {"profile": "3g.40gb", "gpu_instance_id": 1, "mig_index": 3, "sm_active": 40},
        {"profile": "4g.40gb", "gpu_instance_id": 5, "mig_index": 6, "sm_active": 70}]}
    scenario = write_scenario(workdir, {"devices": [a100, h100]})
    with SimulatedNode.start(scenario, state_dir=workdir / "node") as node, \
            OtlpGrpcReceiver() as receiver, cgroups() as groups, \
            FakeKubelet(workdir / "kubelet" / "kubelet.sock") as kubelet:
        migs, h100_migs = _nvml_mig_devices(node, 0), _nvml_mig_devices(node, 1)
        base = v2_root() or v1_root("pids")
        assert base is not None, "no cgroup hierarchy"
        pods = {name: groups.pod(base, name) for name in ("narrow", "wide", "small")}
        pids = {name: groups.spawn(pod.cgroup) for name, pod in pods.items()}
        # One process on each compute instance of GPU instance 2, one on GPU instance 13.
        for name, mig, ci, memory in (("narrow", 0, 0, 4000), ("wide", 0, 1, 2000),
                                      ("small", 1, None, 500)):
            request: dict[str, Any] = {"op": "proc_add", "device": 0, "pid": pids[name],
                                       "mig": mig, "used_memory_mib": memory}
            if ci is not None:
                request["ci"] = ci
            answer = node.command(request)
            assert answer["ok"], answer
        kubelet.set_pods([PodAllocation("ml", name, (ContainerAllocation("main", (
            ContainerDevices(f"nvidia.com/mig-{profile}", (migs[index].uuid,)),)),))
            for name, profile, index in (("narrow", "1c.3g.40gb", 1), ("wide", "2c.3g.40gb", 2),
                                         ("small", "1g.10gb", 5))])
        # GPM fails (transiently) for the H100's first calls: its MIG devices' probes among them.
        failed = node.command({"op": "fail", "device": 1, "function": "nvmlGpmSampleGet",
                               "code": "NVML_ERROR_UNKNOWN", "count": 12})
        assert failed["ok"], failed
        config = workdir / "agent.yaml"
        config.write_text(yaml.safe_dump({
            "groups": {"slow": {"interval": 0.5}, "gpm": {"interval": 0.3},
                       "processes": {"interval": 0.3}},
            "attribution": {"reconcile_interval": 1,
                            "kubelet": {"socket": str(kubelet.socket_path),
                                        "refresh_interval": 1}},
            "health": {"enabled": True, "kmsg": False},
        }), encoding="utf-8")
        agent = AgentProcess(workdir, receiver.endpoint, node.env,
                             ["--interval", "0.3", "--export-interval", "0.3", "--config",
                              str(config)], env={"K8S_NODE_NAME": "gpu-node-a"})
        try:
            yield Layout(node, receiver, agent, migs, h100_migs, pids)
        finally:
            agent.close()


def _on(points: list[Point], metric: str, parent: str) -> dict[str, Point]:
    return {str(p.attributes["hw.id"]): p for p in select(points, metric, hw__parent=parent)}


def test_the_node_lays_mig_out_as_real_gpus_do(layout: Layout) -> None:
    assert sorted(layout.migs) == [1, 2, 5]  # index 0 and 3, 4 are holes
    first, second, small = layout.migs[1], layout.migs[2], layout.migs[5]
    assert (first.gi, first.ci, second.gi, second.ci, small.gi, small.ci) == (2, 0, 2, 1, 13, 0)
    assert first.used == second.used == GI_USED_MIB * MIB  # one GPU instance's memory


def test_every_mig_device_after_a_hole_is_monitored(layout: Layout) -> None:
    """Enumeration stopped at the first NOT_FOUND (index 0 here): nothing was monitored."""
    points = wait_export(layout.receiver.store,
                         lambda pts: len(_on(pts, "hw.gpu.memory.usage", A100)) == 3,
                         "the A100's three MIG devices")
    usage = _on(points, "hw.gpu.memory.usage", A100)
    for mig in layout.migs.values():
        attributes = usage[mig.uuid].attributes
        assert attributes["gpu.mig.gpu_instance.id"] == mig.gi
        assert attributes["gpu.mig.compute_instance.id"] == mig.ci
        assert usage[mig.uuid].value == mig.used
    # gpu.mig.profile is the GPU instance's (telemetry.md); a compute instance smaller than
    # it says its own in gpu.mig.compute_instance.profile, absent where they are the same.
    for index, compute in ((1, "1c.3g.40gb"), (2, "2c.3g.40gb")):
        attributes = usage[layout.migs[index].uuid].attributes
        assert attributes["gpu.mig.profile"] == "3g.40gb"
        assert attributes["gpu.mig.compute_instance.profile"] == compute
    whole = [m for i, m in layout.migs.items() if i not in (1, 2)]
    assert whole and all("gpu.mig.compute_instance.profile" not in
                         usage[m.uuid].attributes for m in whole)


def test_processes_and_pods_go_to_their_compute_instance(layout: Layout) -> None:
    """Split by GPU instance alone, each process of GPU instance 2 went to both its MIG
    devices: its memory counted twice, its pod on both."""
    def named(points: list[Point]) -> bool:
        return all(select(points, "gpu.process.memory.usage", process__pid=pid,
                          k8s__pod__name=name) for name, pid in layout.pids.items())

    points = wait_export(layout.receiver.store, named, "each pod's process named")
    for name, index, memory in (("narrow", 1, 4000), ("wide", 2, 2000), ("small", 5, 500)):
        (process,) = select(points, "gpu.process.memory.usage", process__pid=layout.pids[name])
        assert process.attributes["hw.id"] == layout.migs[index].uuid, name
        assert process.attributes["k8s.pod.name"] == name
        assert process.value == memory * MIB
    # Per MIG device, its own processes only: the GPU instance's memory is not counted twice.
    per_device: dict[str, float] = {}
    for process in select(points, "gpu.process.memory.usage", hw__parent=A100):
        hw_id = str(process.attributes["hw.id"])
        per_device[hw_id] = per_device.get(hw_id, 0) + process.value
    assert per_device == {layout.migs[1].uuid: 4000 * MIB, layout.migs[2].uuid: 2000 * MIB,
                          layout.migs[5].uuid: 500 * MIB}


def test_an_xid_names_its_compute_instance_and_its_pod(layout: Layout) -> None:
    """An XID's instance mapped to the first MIG device of its GPU instance."""
    store = layout.receiver.store
    wait_export(store, lambda pts: len(select(pts, "gpu.process.memory.usage",
                                               k8s__pod__name="wide")) == 1, "wide pod named")
    answer = layout.node.command({"op": "xid", "device": 0, "code": 43, "mig": 0, "ci": 1})
    assert answer["ok"] and answer["compute_instance_id"] == 1
    (event,) = store.wait_for(lambda s: s.logs("gpu.xid", {"gpu.xid.code": 43}), timeout=20,
                              what="the XID 43 of compute instance 1")
    assert event.attributes["hw.id"] == layout.migs[2].uuid
    assert event.attributes["gpu.mig.compute_instance.id"] == 1
    assert event.attributes["k8s.pod.name"] == "wide"  # a string: one record per process


def test_gpm_starts_after_transient_errors_at_its_probe(layout: Layout) -> None:
    """A transient error at a MIG device's GPM probe turned GPM off for its lifetime."""
    store = layout.receiver.store

    def activity() -> dict[str, float]:
        return {str(p.attributes["hw.id"]): p.value
                for p in store.points("gpu.sm.utilization", {"hw.parent": H100})}

    found = store.wait_for(lambda s: len(activity()) == 2 and activity(), timeout=30,
                           what="GPM of both H100 MIG devices")
    stats = layout.node.command({"op": "stats"})
    injected = stats["chaos"]["injected"]  # type: ignore[index]
    assert injected["nvmlGpmSampleGet"]["NVML_ERROR_UNKNOWN"] == 12  # every failure served
    assert found[layout.h100_migs[3].uuid] == pytest.approx(0.40)
    assert found[layout.h100_migs[6].uuid] == pytest.approx(0.70)
    assert "no GPM per instance" not in layout.agent.log()


def test_a_transient_error_in_a_mig_scan_keeps_the_instances(layout: Layout) -> None:
    """One failed call during a scan removed the instance (series and pod attribution gone
    until the next scan brought it back)."""
    store = layout.receiver.store
    wait_export(store, lambda pts: len(_on(pts, "hw.gpu.memory.usage", A100)) == 3,
                "the A100's MIG devices")
    calls = "nvmlDeviceGetMigDeviceHandleByIndex"

    def scanned() -> int:
        per_device = layout.node.command({"op": "stats"})["per_device"]
        return int(per_device.get(calls, {}).get("0", 0))  # type: ignore[union-attr]

    for function in (calls, "nvmlDeviceGetUUID"):
        answer = layout.node.command({"op": "fail", "device": 0, "function": function,
                                      "code": "NVML_ERROR_UNKNOWN", "count": 4})
        assert answer["ok"], answer
    store.wait_for(lambda s: _injected(layout, calls) >= 4
                   and _injected(layout, "nvmlDeviceGetUUID") >= 4, timeout=30,
                   what="the failed scan calls")
    # Two whole scans (every index) after the failures: any removal has been logged by then.
    after = scanned()
    store.wait_for(lambda s: scanned() >= after + 14, timeout=30, what="two more scans")
    log = layout.agent.log()
    for mig in layout.migs.values():
        assert f"partition {mig.uuid} is gone" not in log, log[-3000:]
    points = wait_export(store, lambda pts: len(_on(pts, "hw.gpu.memory.usage", A100)) == 3,
                         "the A100's MIG devices, still")
    assert set(_on(points, "hw.gpu.memory.usage", A100)) == {m.uuid for m in
                                                            layout.migs.values()}


def _injected(layout: Layout, function: str) -> int:
    injected = layout.node.command({"op": "stats"})["chaos"]["injected"]  # type: ignore[index]
    return int(injected.get(function, {}).get("NVML_ERROR_UNKNOWN", 0))


def test_ecc_is_read_where_nvml_keeps_it_on_a_mig_gpu(layout: Layout) -> None:
    """On a MIG-enabled GPU, NVML serves no volatile ECC count and no remapped rows on the
    parent (nvml.h; nvidia-smi prints "On" in its volatile-ECC column there, mig-parted#31);
    per instance it keeps "non-DRAM uncorrectable volatile errors" on the MIG handle."""
    store = layout.receiver.store
    wait_export(store, lambda pts: len(_on(pts, "hw.errors", A100)) == 3,
                "an ECC count on each A100 MIG device")
    answer = layout.node.command({"op": "ecc", "device": 0, "type": "double_bit", "mig": 0,
                                  "ci": 1})
    assert answer["ok"] and answer["compute_instance_id"] == 1
    points = wait_export(store, lambda pts: _on(pts, "hw.errors", A100).get(
        layout.migs[2].uuid) is not None and _on(pts, "hw.errors", A100)[
        layout.migs[2].uuid].value == 1, "the SRAM error on compute instance 1")
    errors = _on(points, "hw.errors", A100)
    assert errors[layout.migs[2].uuid].attributes["error.type"] == "uncorrected"
    assert errors[layout.migs[1].uuid].value == 0  # the other compute instance's own count
    assert not select(points, "hw.errors", hw__id=A100)
    assert not select(points, "gpu.memory.row_remap.count", hw__id=A100)
    assert not select(points, "gpu.memory.row_remap.pending", hw__id=A100)
