"""A pod the kubelet's last List did not have is fetched by name with Get, where it exists."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

import pytest

from gpu_otel_agent.plugins.kubernetes.podresources import PodResourcesClient
from gpu_otel_agent.workloads.devices import GpuDevice
from gpu_otel_agent.workloads.pods import ContainerAllocation, ContainerDevices, PodAllocation
from gpu_otel_agent.workloads.procfs import NAMESPACE_FILE, ProcReader
from gpu_otel_agent.workloads.resolver import WorkloadResolver
from gpu_otel_agent.workloads.service import ServiceSettings, WorkloadService
from tests.receivers.kubelet import FakeKubelet

UID = "aaaaaaaa-1111-2222-3333-444455556666"
GPU = GpuDevice("GPU-0")
POD = PodAllocation("team-a", "trainer", (ContainerAllocation(
    "main", (ContainerDevices("nvidia.com/gpu", ("GPU-0::1",)),)),))


def _proc(root: Path) -> None:
    base = root / "10"
    base.mkdir(parents=True)
    (base / "cgroup").write_text(f"0::/kubepods/burstable/pod{UID}/{'c' * 64}\n")
    (base / "comm").write_text("python\n")
    (base / "stat").write_text(f"{base.name} (a (b) c) S 1 1 1\n")
    (base / "environ").write_bytes(b"HOSTNAME=trainer\0")
    namespace = base / NAMESPACE_FILE
    namespace.parent.mkdir(parents=True)
    namespace.write_text("team-a")


@pytest.mark.parametrize("with_get", [True, False])
def test_new_pod_is_named_without_waiting_for_the_refresh(tmp_path: Path,
                                                          with_get: bool) -> None:
    _proc(tmp_path / "proc")
    (tmp_path / "cgroup").mkdir()
    resolver = WorkloadResolver(ProcReader(tmp_path / "proc"))

    async def scenario(kubelet: FakeKubelet) -> str | None:
        client = PodResourcesClient(kubelet.socket_path, timeout=2)
        service = WorkloadService(resolver, ServiceSettings(
            cgroup_root=tmp_path / "cgroup", refresh_interval=3600), client)
        running = asyncio.create_task(service.run())
        try:
            while not resolver.pods_known:
                await asyncio.sleep(0.01)
            kubelet.set_pods([POD])  # the pod starts after the agent's List
            facts = resolver.process(10)
            assert facts is not None and facts.namespace == "team-a"
            assert resolver.workload(facts, GPU).pod_name is None  # not listed yet
            for _ in range(300):
                name = resolver.workload(facts, GPU).pod_name
                if name:
                    return name
                await asyncio.sleep(0.01)
            return None
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running

    with FakeKubelet(tmp_path / "kubelet.sock", with_get=with_get) as kubelet:
        assert asyncio.run(scenario(kubelet)) == "trainer"
        assert kubelet.calls["Get"] == (1 if with_get else 0)
        assert kubelet.calls["List"] == (1 if with_get else 2)
