"""Kubernetes DRA end to end: pods holding GPUs through ResourceClaims on the simulated node.

The test kubelet speaks pod-resources v1 generated from the vendored upstream ``api.proto``
(Kubernetes 1.36.3's: the 1.35+ format, ``dynamic_resources`` with ``share_id``); each
claim has the CDI spec NVIDIA's DRA driver writes for it and the node has the kernel driver's
/proc files, in a host root the agent is pointed at (``attribution.kubelet.dra_host_root``;
formats and sources: tests/integration/dra_files.py). Pods live in real cgroups with real
processes; their processes carry no ``HOSTNAME`` unless they share a GPU, so a pod is found by
the claimed device alone. What the node serves (UUIDs, minors, MIG ids) is read through NVML
independently of the agent. Phases: whole-GPU, MIG and shared (time-sliced) claims, a pod with
a device-plugin GPU and a claimed MIG device, the ``dcgm`` scheme's DRA labels, a claim released
with its pod gone, and the kubelet restarted with a new claimed pod started meanwhile.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from gpu_otel_agent.simulation.node import SimulatedNode
from gpu_otel_agent.workloads.pods import (
    ClaimAllocation,
    ClaimDevice,
    ContainerAllocation,
    ContainerDevices,
    PodAllocation,
)
from tests.integration.cgroups import Cgroups, Pod, new_uid
from tests.integration.conftest import UUIDS
from tests.integration.dra_files import ClaimedDevice, Gpu, spec_path, write_claim, write_driver
from tests.integration.exports import select, wait_export
from tests.integration.harness import AgentProcess, h100, write_scenario
from tests.receivers.kubelet import FakeKubelet
from tests.receivers.netutil import free_port
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import Point

pytestmark = pytest.mark.integration
DRIVER, POOL, NAMESPACE = "gpu.nvidia.com", "gpu-node-a", "ml"
DRA_KEYS = ("gpu.dra.driver", "gpu.dra.pool", "gpu.dra.device")
A100 = UUIDS[3]


_READ_NODE = """
import json, pynvml
pynvml.nvmlInit()
gpus, migs = [], {}
for index in range(pynvml.nvmlDeviceGetCount()):
    h = pynvml.nvmlDeviceGetHandleByIndex(index)
    gpus.append((pynvml.nvmlDeviceGetUUID(h), pynvml.nvmlDeviceGetMinorNumber(h),
                 pynvml.nvmlDeviceGetPciInfo(h).busId, pynvml.nvmlDeviceGetMemoryInfo(h).total))
parent = pynvml.nvmlDeviceGetHandleByIndex(3)
for i in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(parent)):
    try:
        m = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, i)
    except pynvml.NVMLError_NotFound:
        continue  # an empty index: the next may hold one (go-nvlib VisitMigDevices)
    migs[pynvml.nvmlDeviceGetName(m).rsplit(" MIG ", 1)[1]] = (
        pynvml.nvmlDeviceGetUUID(m), pynvml.nvmlDeviceGetGpuInstanceId(m),
        pynvml.nvmlDeviceGetComputeInstanceId(m), pynvml.nvmlDeviceGetMemoryInfo(m).total)
print(json.dumps([gpus, migs]))
"""


def _nvml_node(node: SimulatedNode,
               ) -> tuple[list[tuple[Gpu, int]], dict[str, tuple[str, int, int, int]]]:
    """The GPUs (UUID, minor, bus id; memory in bytes) and the A100's MIG devices (profile ->
    uuid, gi, ci, memory in bytes),
    read through pynvml in a process of its own (a process attaches to one node)."""
    out = subprocess.run([sys.executable, "-c", _READ_NODE], env={**os.environ, **node.env},
                         capture_output=True, text=True, check=True, timeout=60).stdout
    gpus, migs = json.loads(out)
    return [(Gpu(*g[:3]), g[3]) for g in gpus], {k: tuple(v) for k, v in migs.items()}


def _claim(root: Path, name: str, device: ClaimedDevice, uid: str = "") -> ClaimAllocation:
    """A prepared claim: its CDI spec on the node and what the kubelet lists for it."""
    cdi = write_claim(root, uid or new_uid(), [device])
    return ClaimAllocation(name, NAMESPACE, (ClaimDevice(DRIVER, POOL, device.name, None,
                                                          tuple(cdi)),))


def _pod(pod: Pod, *claims: ClaimAllocation, plugin_gpu: str | None = None) -> PodAllocation:
    devices = (ContainerDevices("nvidia.com/gpu", (plugin_gpu,)),) if plugin_gpu else ()
    return PodAllocation(pod.namespace, pod.name, (ContainerAllocation("main", devices, claims),))


def _process(node: SimulatedNode, device: int, pid: int, memory_mib: int,
             mig: int | None = None) -> None:
    request: dict[str, object] = {"op": "proc_add", "device": device, "pid": pid,
                                  "used_memory_mib": memory_mib, "sm_util": 10}
    if mig is not None:
        request["mig"] = mig
    answer = node.command(request)
    assert answer["ok"], answer


def _dra(points: list[Point], metric: str, uuid: str) -> tuple[object, ...]:
    (point,) = select(points, metric, hw__id=uuid)
    return tuple(point.attributes.get(key) for key in DRA_KEYS)


def _scrape(port: int) -> list[dict[str, str]]:
    """The label sets of DCGM_FI_DEV_FB_USED on the agent's dcgm-scheme endpoint."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as answer:
        text = answer.read().decode()
    return [dict(sample.labels) for family in text_string_to_metric_families(text)
            for sample in family.samples if sample.name == "DCGM_FI_DEV_FB_USED"]


def test_claimed_gpus_are_attributed_and_follow_claims_and_the_kubelet(
    groups: Cgroups, v2: Path, otlp_grpc_receiver: OtlpGrpcReceiver, tmp_path: Path,
) -> None:
    a100 = {"model": "NVIDIA A100-SXM4-80GB", "uuid": A100,
            "mig": [{"profile": "3g.40gb"}, {"profile": "1g.10gb"}]}
    scenario = write_scenario(tmp_path, {"driver_version": "580.95.05", "devices": [
        *(h100(i, uuid=UUIDS[i]) for i in range(3)), a100]})
    root = tmp_path / "host"
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as node:
        with_memory, migs = _nvml_node(node)
        gpus = [gpu for gpu, _ in with_memory]
        write_driver(root, gpus)
        minor = [g.minor for g in gpus]
        big_uuid, big_gi, big_ci, big_total = migs["3g.40gb"]
        small_uuid, small_gi, small_ci, _ = migs["1g.10gb"]

        whole = groups.pod(v2, "whole")
        share = [groups.pod(v2, f"share-{x}") for x in "ab"]
        mixed, big = groups.pod(v2, "mixed"), groups.pod(v2, "big")
        whole_uid = new_uid()
        whole_claim = _claim(root, "whole-gpu", ClaimedDevice(f"gpu-{minor[0]}", minor[0]),
                             whole_uid)
        shared_claim = _claim(root, "shared-gpu", ClaimedDevice(f"gpu-{minor[1]}", minor[1]))
        small_claim = _claim(root, "mig-small", ClaimedDevice(
            f"gpu-{minor[3]}-mig-1g10gb-19-6", minor[3], (small_gi, small_ci)))
        big_claim = _claim(root, "mig-big", ClaimedDevice(
            f"gpu-{minor[3]}-mig-3g40gb-9-0", minor[3], (big_gi, big_ci)))
        pods = [_pod(whole, whole_claim), *(_pod(p, shared_claim) for p in share),
                _pod(mixed, small_claim, plugin_gpu=UUIDS[2]), _pod(big, big_claim)]
        pid = {"whole": groups.spawn(whole.cgroup),
               "share-a": groups.spawn(share[0].cgroup, {"HOSTNAME": share[0].name}),
               "share-b": groups.spawn(share[1].cgroup, {"HOSTNAME": share[1].name}),
               "mixed-plugin": groups.spawn(mixed.cgroup),
               "mixed-mig": groups.spawn(mixed.cgroup), "big": groups.spawn(big.cgroup)}
        _process(node, 0, pid["whole"], 1000)
        _process(node, 1, pid["share-a"], 2000)
        _process(node, 1, pid["share-b"], 3000)
        _process(node, 2, pid["mixed-plugin"], 4000)
        _process(node, 3, pid["mixed-mig"], 500, mig=1)
        _process(node, 3, pid["big"], 5000, mig=0)

        kubelet = FakeKubelet(tmp_path / "kubelet" / "kubelet.sock")
        kubelet.set_pods(pods)
        kubelet.start()
        port = free_port()
        config = tmp_path / "agent.yaml"
        config.write_text(
            "groups: {processes: {interval: 0.3}, slow: {interval: 5}}\n"
            "health: {enabled: false}\n"
            f"prometheus: {{enabled: true, listen: '127.0.0.1:{port}', scheme: dcgm}}\n"
            "attribution:\n  reconcile_interval: 1\n"
            f"  kubelet: {{socket: {kubelet.socket_path}, refresh_interval: 1, "
            f"dra_host_root: {root}}}\n", encoding="utf-8")
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             ["--interval", "0.3", "--export-interval", "0.3", "--config",
                              str(config)], env={"K8S_NODE_NAME": POOL}).serving(port)
        store = otlp_grpc_receiver.store
        try:
            def named(points: list[Point]) -> bool:
                return all(select(points, "gpu.process.memory.usage", process__pid=p,
                                  k8s__pod__name=name.rsplit("-", 1)[0]
                                  if name.startswith("mixed") else name)
                           for name, p in pid.items())

            points = wait_export(store, named, "every claimed pod named")
            expected = {"whole": ("whole-gpu", UUIDS[0]), "share-a": ("shared-gpu", UUIDS[1]),
                        "share-b": ("shared-gpu", UUIDS[1]), "mixed-plugin": (None, UUIDS[2]),
                        "mixed-mig": ("mig-small", small_uuid), "big": ("mig-big", big_uuid)}
            for name, (claim, uuid) in expected.items():
                (point,) = select(points, "gpu.process.memory.usage", process__pid=pid[name])
                assert point.attributes["hw.id"] == uuid, name
                assert point.attributes["k8s.namespace.name"] == NAMESPACE
                assert point.attributes["k8s.container.name"] == "main"
                assert point.attributes.get("k8s.resourceclaim.name") == claim, name
                assert "k8s.resourceclaim.namespace" not in point.attributes  # the pod's
            # Allocated memory: the whole GPU or MIG device a claim holds alone; nothing known
            # for the two pods time-slicing one GPU through one claim.
            (whole_limit,) = select(points, "gpu.container.memory.limit", k8s__pod__name="whole")
            assert whole_limit.value == with_memory[0][1]  # the GPU's, as NVML serves it
            (big_limit,) = select(points, "gpu.container.memory.limit", k8s__pod__name="big")
            assert big_limit.value == big_total
            assert not select(points, "gpu.container.memory.limit", k8s__pod__name="share-a")
            # Device series: the DRA device each claimed GPU or MIG device is; none on the
            # device-plugin GPU nor on the MIG parent (its instances are the claimed devices).
            assert _dra(points, "hw.power", UUIDS[0]) == (DRIVER, POOL, f"gpu-{minor[0]}")
            assert _dra(points, "hw.power", UUIDS[1]) == (DRIVER, POOL, f"gpu-{minor[1]}")
            assert _dra(points, "hw.power", UUIDS[2]) == (None, None, None)
            assert _dra(points, "hw.power", A100) == (None, None, None)
            assert _dra(points, "hw.gpu.memory.usage", small_uuid)[2] == small_claim.devices[
                0].device
            assert _dra(points, "hw.gpu.memory.usage", big_uuid)[2] == big_claim.devices[0].device

            # The dcgm scheme: dcgm-exporter's DRA labels on each claimed device's series.
            labels = _scrape(port)
            (on_whole,) = [lab for lab in labels if lab["UUID"] == UUIDS[0]]
            assert {k: v for k, v in on_whole.items() if k.startswith("dra_")} == {
                "dra_claim_name": "whole-gpu", "dra_claim_namespace": NAMESPACE,
                "dra_driver_name": DRIVER, "dra_pool_name": POOL,
                "dra_device_name": f"gpu-{minor[0]}"}
            assert on_whole["hostname"] == POOL and on_whole["pod"] == "whole"
            assert on_whole["DCGM_FI_DRIVER_VERSION"] == "580.95.05"
            assert sorted(lab["pod"] for lab in labels if lab["UUID"] == UUIDS[1]) == [
                "share-a", "share-b"]
            (on_small,) = [lab for lab in labels if lab.get("GPU_I_PROFILE") == "1g.10gb"]
            assert (on_small["dra_mig_profile"], on_small["dra_mig_device_uuid"]) == (
                "1g.10gb", small_uuid)
            (on_plugin,) = [lab for lab in labels if lab["UUID"] == UUIDS[2]]
            assert on_plugin["pod"] == "mixed" and not any(k.startswith("dra_")
                                                           for k in on_plugin)

            # The claim is released and its pod gone: process, pod and claim go, and so do
            # the device's DRA attributes.
            groups.kill(pid["whole"])
            assert node.command({"op": "proc_rm", "pid": pid["whole"]})["ok"]
            kubelet.set_pods(pods[1:])
            spec_path(root, whole_uid).unlink()  # the DRA driver unprepares the claim
            whole.cgroup.rmdir()
            whole.cgroup.parent.rmdir()
            points = wait_export(store, lambda pts: _dra(pts, "hw.power", UUIDS[0]) == (
                None, None, None), "the released GPU without DRA attributes")
            assert not select(points, "gpu.process.memory.usage", process__pid=pid["whole"])
            assert _dra(points, "hw.power", UUIDS[1])[2] == f"gpu-{minor[1]}"

            # The kubelet restarts; a pod claiming GPU 0 starts meanwhile: its cgroup identity
            # only, then its names, claim and device once the kubelet answers again.
            kubelet.stop()
            late = groups.pod(v2, "late")
            late_claim = _claim(root, "late-gpu", ClaimedDevice(f"gpu-{minor[0]}", minor[0]))
            pid["late"] = groups.spawn(late.cgroup)
            _process(node, 0, pid["late"], 700)
            points = wait_export(store, lambda pts: select(
                pts, "gpu.process.memory.usage", process__pid=pid["late"]), "late pod's process")
            (unnamed,) = select(points, "gpu.process.memory.usage", process__pid=pid["late"])
            assert unnamed.attributes["k8s.pod.uid"] == late.uid
            assert "k8s.pod.name" not in unnamed.attributes
            kubelet = FakeKubelet(kubelet.socket_path)
            kubelet.set_pods([*pods[1:], _pod(late, late_claim)])
            kubelet.start()
            points = wait_export(store, lambda pts: select(
                pts, "gpu.process.memory.usage", process__pid=pid["late"],
                k8s__resourceclaim__name="late-gpu"), "late pod named after the restart")
            (named_late,) = select(points, "gpu.process.memory.usage", process__pid=pid["late"])
            assert named_late.attributes["k8s.pod.name"] == "late"
            assert _dra(points, "hw.power", UUIDS[0]) == (DRIVER, POOL, f"gpu-{minor[0]}")

            # One MIG instance of the A100 claimed, alone (issue 28): the claimed instance
            # carries its DRA name, its parent GPU none (it is not that device).
            groups.kill(pid["big"])
            assert node.command({"op": "proc_rm", "pid": pid["big"]})["ok"]
            kubelet.set_pods([pod for pod in pods[1:] if pod.name != "big"]
                             + [_pod(late, late_claim)])
            points = wait_export(store, lambda pts: _dra(
                pts, "hw.gpu.memory.usage", big_uuid) == (None, None, None),
                "the released MIG instance without DRA attributes")
            assert _dra(points, "hw.gpu.memory.usage", small_uuid)[2] == small_claim.devices[
                0].device
            assert _dra(points, "hw.power", A100) == (None, None, None)
            assert "no DRA claims" not in agent.log()  # the kubelet always listed some
        finally:
            agent.close()
            kubelet.stop()
