"""Per-process and per-pod GPU use, end to end: real cgroups, real processes registered on the
simulated node, a kubelet pod-resources server speaking v1 over a unix socket, and a real OTLP
receiver."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpu_otel_agent.simulation.node import SimulatedNode
from gpu_otel_agent.workloads.pods import ContainerAllocation, ContainerDevices, PodAllocation
from tests.integration.cgroups import Cgroups, Pod, container_id, v1_root
from tests.integration.conftest import UUIDS
from tests.integration.exports import select, wait_export
from tests.integration.harness import AgentProcess, h100, write_scenario
from tests.receivers.kubelet import FakeKubelet
from tests.receivers.otlp_grpc import OtlpGrpcReceiver
from tests.receivers.records import Point

pytestmark = pytest.mark.integration
MIB = 1024 * 1024
TOTAL_MIB = 81559
MEMORY_RESOURCE = "example.com/gpu-memory"  # a fractional device plugin: 1 unit = 1 MiB
FAST = ["--interval", "0.2", "--export-interval", "0.3"]


@pytest.fixture
def node(tmp_path: Path) -> Iterator[SimulatedNode]:
    devices = [h100(i, uuid=UUIDS[i], memory_total_mib=TOTAL_MIB) for i in range(2)]
    scenario = write_scenario(tmp_path, {"driver_version": "580.95.05", "devices": devices})
    with SimulatedNode.start(scenario, state_dir=tmp_path / "node") as sim:
        yield sim


def _config(tmp_path: Path, socket: Path, **extra: str) -> list[str]:
    lines = [
        "groups: {processes: {interval: 0.2}, slow: {interval: 5}}",
        "attribution:",
        "  reconcile_interval: 1",
        f"  memory_resources: {{{MEMORY_RESOURCE}: {MIB}}}",
        f"  kubelet: {{socket: {socket}, refresh_interval: 1, timeout: 2}}",
        *(f"  {k}: {v}" for k, v in extra.items()),
    ]
    path = tmp_path / "agent.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return [*FAST, "--config", str(path)]


def _allocation(pod: Pod, container: str, *device_ids: str, memory_mib: int = 0,
                ) -> PodAllocation:
    devices = [ContainerDevices("nvidia.com/gpu", device_ids)]
    if memory_mib:
        devices.append(ContainerDevices(MEMORY_RESOURCE,
                                        tuple(f"m{i}" for i in range(memory_mib))))
    return PodAllocation(pod.namespace, pod.name, (ContainerAllocation(container,
                                                                        tuple(devices)),))


def _gpu_process(node: SimulatedNode, device: int, pid: int, memory_mib: int, sm: int, *,
                 kind: str = "compute") -> None:
    answer = node.command({"op": "proc_add", "device": device, "pid": pid, "type": kind,
                           "used_memory_mib": memory_mib, "sm_util": sm})
    assert answer["ok"], answer


def test_per_pod_values_are_the_sum_of_their_processes(
    node: SimulatedNode, groups: Cgroups, v2: Path, otlp_grpc_receiver: OtlpGrpcReceiver,
    tmp_path: Path,
) -> None:
    # Pod A: two processes sharing GPU 0 through a time-sliced replica, cgroupfs driver.
    # Pod B: systemd driver, besteffort, an MPS client on another replica of GPU 0 with a
    # fractional memory share.
    # Pod C: guaranteed, the whole GPU 1, in a cgroup v1 hierarchy where the machine has one.
    a = groups.pod(v2, "trainer-a", "burstable", "cgroupfs")
    b = groups.pod(v2, "infer-b", "besteffort", "systemd")
    c_base = v1_root("pids") or v2
    c = groups.pod(c_base, "whole-c", "guaranteed", "cgroupfs")
    a1 = groups.spawn(a.cgroup, {"HOSTNAME": a.name})
    a2 = groups.spawn(a.cgroup, {"HOSTNAME": a.name})
    b1 = groups.spawn(b.cgroup, {"HOSTNAME": b.name})
    c1 = groups.spawn(c.cgroup, {"HOSTNAME": c.name})
    host = groups.spawn(Path("/sys/fs/cgroup/unified") if v2.name == "unified" else v2)
    with FakeKubelet(tmp_path / "kubelet" / "kubelet.sock") as kubelet:
        kubelet.set_pods([
            _allocation(a, "main", f"{UUIDS[0]}::1"),
            _allocation(b, "server", f"{UUIDS[0]}::2", memory_mib=2048),
            _allocation(c, "solo", UUIDS[1]),
        ])
        _gpu_process(node, 0, a1, 1000, 20)
        _gpu_process(node, 0, a2, 3000, 15)
        _gpu_process(node, 0, b1, 500, 30, kind="mps")  # an MPS client: only in the MPS list
        _gpu_process(node, 1, c1, 7000, 60)
        _gpu_process(node, 0, host, 100, 5)
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             _config(tmp_path, kubelet.socket_path))
        try:
            store = otlp_grpc_receiver.store

            def complete(points: list[Point]) -> bool:
                named = select(points, "gpu.container.utilization", k8s__pod__name=a.name,
                                hw__gpu__task="general")
                return bool(named) and len(select(points, "gpu.process.utilization",
                                                   hw__gpu__task="general")) == 5

            points = wait_export(store, complete, "all processes with utilization and names")
            # Every process has its own series, with its workload where it has one.
            for pid, memory, pod in ((a1, 1000, a), (a2, 3000, a), (b1, 500, b), (c1, 7000, c)):
                (point,) = select(points, "gpu.process.memory.usage", process__pid=pid)
                assert point.value == memory * MIB
                assert point.attributes["process.executable.name"] == "sleep"
                assert point.attributes["k8s.pod.uid"] == pod.uid
                assert point.attributes["container.id"] == pod.container_id
                assert point.attributes["k8s.pod.name"] == pod.name
                assert point.attributes["k8s.namespace.name"] == "ml"
            (bare,) = select(points, "gpu.process.memory.usage", process__pid=host)
            assert not {"k8s.pod.uid", "container.id", "k8s.pod.name"} & set(bare.attributes)
            assert "process.command_line" not in bare.attributes  # off unless enabled
            # Per pod = the sum over its processes, for memory and each engine.
            for pod, pids in ((a, (a1, a2)), (b, (b1,)), (c, (c1,))):
                (memory,) = select(points, "gpu.container.memory.usage", k8s__pod__uid=pod.uid)
                assert memory.value == sum(
                    select(points, "gpu.process.memory.usage", process__pid=p)[0].value
                    for p in pids)
                (util,) = select(points, "gpu.container.utilization", k8s__pod__uid=pod.uid,
                                  hw__gpu__task="general")
                assert util.value == pytest.approx(sum(
                    select(points, "gpu.process.utilization", process__pid=p,
                            hw__gpu__task="general")[0].value for p in pids))
            (util_a,) = select(points, "gpu.container.utilization", k8s__pod__uid=a.uid,
                                hw__gpu__task="general")
            assert util_a.value == pytest.approx(0.35)
            assert util_a.attributes["k8s.container.name"] == "main"
            assert util_a.attributes["hw.id"] == UUIDS[0]
            # Allocated shares: the whole GPU 1 for C, the fractional 2048 MiB for B, and
            # nothing known for A's time-sliced replica.
            (limit_c,) = select(points, "gpu.container.memory.limit", k8s__pod__uid=c.uid)
            assert limit_c.value == TOTAL_MIB * MIB and limit_c.attributes["hw.id"] == UUIDS[1]
            (limit_b,) = select(points, "gpu.container.memory.limit", k8s__pod__uid=b.uid)
            assert limit_b.value == 2048 * MIB
            assert not select(points, "gpu.container.memory.limit", k8s__pod__uid=a.uid)
            overflow = select(points, "gpu.process.series.overflow", hw__id=UUIDS[0])
            assert [p.value for p in overflow] == [0]
        finally:
            agent.close()


def test_exit_new_pod_and_kubelet_restart(
    node: SimulatedNode, groups: Cgroups, v2: Path, otlp_grpc_receiver: OtlpGrpcReceiver,
    tmp_path: Path,
) -> None:
    a = groups.pod(v2, "trainer-a")
    a1 = groups.spawn(a.cgroup, {"HOSTNAME": a.name})
    a2 = groups.spawn(a.cgroup, {"HOSTNAME": a.name})
    kubelet = FakeKubelet(tmp_path / "kubelet" / "kubelet.sock")
    kubelet.start()
    kubelet.set_pods([_allocation(a, "main", f"{UUIDS[0]}::1")])
    _gpu_process(node, 0, a1, 1000, 20)
    _gpu_process(node, 0, a2, 3000, 15)
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                         _config(tmp_path, kubelet.socket_path))
    store = otlp_grpc_receiver.store
    try:
        wait_export(store, lambda pts: len(select(
            pts, "gpu.process.memory.usage", k8s__pod__name=a.name)) == 2, "pod A named")

        # A process exits (the simulated GPU still lists it, as a slow driver might): its
        # series is gone at the next export and the pod total drops to the survivor.
        groups.kill(a2)
        points = wait_export(store, lambda pts: not select(
            pts, "gpu.process.memory.usage", process__pid=a2), "pid series gone")
        (total,) = select(points, "gpu.container.memory.usage", k8s__pod__uid=a.uid)
        assert total.value == 1000 * MIB

        # A new process in a new pod is attributed, names included, at its first export.
        d = groups.pod(v2, "fresh-d", "guaranteed", "systemd")
        kubelet.set_pods([_allocation(a, "main", f"{UUIDS[0]}::1"),
                          _allocation(d, "main", UUIDS[1])])
        lists = kubelet.calls["List"]
        d1 = groups.spawn(d.cgroup, {"HOSTNAME": d.name})
        deadline = time.monotonic() + 10
        while kubelet.calls["List"] == lists and time.monotonic() < deadline:
            time.sleep(0.02)  # the new pod cgroup (inotify) makes the agent ask the kubelet
        assert kubelet.calls["List"] > lists, "no List after the pod's cgroup appeared"
        _gpu_process(node, 1, d1, 4000, 40)
        store.wait_for(lambda s: s.points("gpu.process.memory.usage", {"process.pid": d1}),
                       timeout=15, what="new pod's process")
        first = store.points("gpu.process.memory.usage", {"process.pid": d1})[0]
        assert first.attributes["k8s.pod.name"] == d.name
        assert first.attributes["k8s.pod.uid"] == d.uid

        # The kubelet goes away: a pod started meanwhile has its cgroup identity only; once
        # the kubelet is back, its names return.
        kubelet.stop()
        e = groups.pod(v2, "late-e", "besteffort", "cgroupfs")
        e1 = groups.spawn(e.cgroup, {"HOSTNAME": e.name})
        _gpu_process(node, 1, e1, 200, 10)
        points = wait_export(store, lambda pts: select(
            pts, "gpu.process.memory.usage", process__pid=e1), "pod E without kubelet")
        (unnamed,) = select(points, "gpu.process.memory.usage", process__pid=e1)
        assert unnamed.attributes["k8s.pod.uid"] == e.uid
        assert "k8s.pod.name" not in unnamed.attributes
        kubelet = FakeKubelet(kubelet.socket_path)
        kubelet.set_pods([_allocation(a, "main", f"{UUIDS[0]}::1"),
                          _allocation(d, "main", UUIDS[1]),
                          _allocation(e, "late", f"{UUIDS[1]}::3")])
        kubelet.start()
        points = wait_export(store, lambda pts: select(
            pts, "gpu.process.memory.usage", process__pid=e1, k8s__pod__name=e.name),
            "pod E named after the kubelet returned")
        assert select(points, "gpu.container.memory.usage", k8s__pod__name=a.name)
        assert select(points, "gpu.container.memory.usage", k8s__pod__name=d.name)
    finally:
        agent.close()
        kubelet.stop()


def test_hostile_names(
    node: SimulatedNode, groups: Cgroups, v2: Path, otlp_grpc_receiver: OtlpGrpcReceiver,
    tmp_path: Path,
) -> None:
    long_name = "p" * 10_000
    a = groups.pod(v2, long_name)
    # A process may name itself anything: newline, terminal escape, invalid UTF-8.
    renamer = ("import ctypes, sys, time; "
               "ctypes.CDLL(None).prctl(15, b'ev\\nil\\x1b[2J\\xff\\xfe'); "
               "print(flush=True); time.sleep(600)")
    a1 = groups.spawn(a.cgroup, {"HOSTNAME": long_name},
                      [sys.executable, "-c", renamer, "--token=" + "s" * 10_000])
    pod = PodAllocation("ns\nwith-newline", long_name, (ContainerAllocation(
        "c\r\n" + "x" * 10_000, (ContainerDevices("nvidia.com/gpu", (UUIDS[0],)),)),))
    with FakeKubelet(tmp_path / "kubelet" / "kubelet.sock") as kubelet:
        kubelet.set_pods([pod])
        _gpu_process(node, 0, a1, 1000, 20)
        agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                             _config(tmp_path, kubelet.socket_path,
                                     export_command_line="true"))
        try:
            points = wait_export(otlp_grpc_receiver.store, lambda pts: select(
                pts, "gpu.process.memory.usage", process__pid=a1, k8s__pod__uid=a.uid)
                and select(pts, "gpu.process.memory.usage", process__pid=a1)[0]
                .attributes.get("k8s.pod.name"), "named hostile process")
            (point,) = select(points, "gpu.process.memory.usage", process__pid=a1)
            attrs = point.attributes
            assert attrs["process.executable.name"] == "ev il [2J\ufffd\ufffd"
            command_line = attrs["process.command_line"]
            assert isinstance(command_line, str)
            assert command_line.startswith(f"{sys.executable} -c {renamer} --token=sss")
            assert len(command_line) == 1024 and command_line.endswith("…")
            assert attrs["k8s.namespace.name"] == "ns with-newline"
            pod_name = attrs["k8s.pod.name"]
            assert isinstance(pod_name, str) and len(pod_name) == 128
            assert pod_name.endswith("…")
            container = attrs["k8s.container.name"]
            assert isinstance(container, str) and "\n" not in container and len(container) <= 128
            # ... and sampling goes on.
            wait_export(otlp_grpc_receiver.store, lambda pts: select(
                pts, "hw.gpu.utilization", hw__id=UUIDS[1]), "device metrics still flowing")
        finally:
            agent.close()


def test_slurm_job_and_plain_container(
    node: SimulatedNode, groups: Cgroups, v2: Path, otlp_grpc_receiver: OtlpGrpcReceiver,
    tmp_path: Path,
) -> None:
    job_id = str(4_000_000 + os.getpid() % 100_000)  # unique per run
    job = groups.path(v2 / "system.slice" / "slurmstepd.scope" / f"job_{job_id}" / "step_0"
                      / "user" / "task_0")
    cid = container_id()
    docker = groups.path(v2 / "system.slice" / f"docker-{cid}.scope")
    j1 = groups.spawn(job)
    j2 = groups.spawn(job)
    d1 = groups.spawn(docker)
    _gpu_process(node, 0, j1, 1500, 25)
    _gpu_process(node, 1, j2, 2500, 35)
    _gpu_process(node, 1, d1, 700, 5)
    agent = AgentProcess(tmp_path, otlp_grpc_receiver.endpoint, node.env,
                         _config(tmp_path, tmp_path / "no-kubelet" / "kubelet.sock"))
    try:
        points = wait_export(otlp_grpc_receiver.store, lambda pts: len(select(
            pts, "gpu.container.memory.usage")) == 3, "job and container totals")
        (job0,) = select(points, "gpu.container.memory.usage", slurm__job__id=job_id,
                          hw__id=UUIDS[0])
        (job1,) = select(points, "gpu.container.memory.usage", slurm__job__id=job_id,
                          hw__id=UUIDS[1])
        assert (job0.value, job1.value) == (1500 * MIB, 2500 * MIB)
        assert "k8s.pod.uid" not in job0.attributes and "container.id" not in job0.attributes
        (plain,) = select(points, "gpu.container.memory.usage", container__id=cid)
        assert plain.value == 700 * MIB and "k8s.pod.uid" not in plain.attributes
        (proc,) = select(points, "gpu.process.memory.usage", process__pid=j2)
        assert proc.attributes["slurm.job.id"] == job_id
    finally:
        agent.close()
