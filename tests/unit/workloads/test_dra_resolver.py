"""Claims in the resolver: who holds a GPU through a claim, and the DRA device it is."""

from __future__ import annotations

from pathlib import Path

from gpu_otel_agent.workloads.devices import GpuDevice
from gpu_otel_agent.workloads.pods import (
    ClaimAllocation,
    ClaimDevice,
    ContainerAllocation,
    ContainerDevices,
    PodAllocation,
)
from gpu_otel_agent.workloads.procfs import ProcReader
from gpu_otel_agent.workloads.resolver import WorkloadResolver
from tests.unit.workloads.test_resolver import UID_A, UID_B, _proc

PLUGIN_GPU = GpuDevice("GPU-1", "00000000:19:00.0")
MIG = GpuDevice("MIG-7", "", None, ("MIG-GPU-2/3/0",))
CLAIMED = ClaimDevice("gpu.nvidia.com", "node-a", "gpu-2-mig-1g10gb-19-3", None,
                      ("k8s.gpu.nvidia.com/claim=u-gpu-2-mig-1g10gb-19-3",), ("MIG-GPU-2/3/0",))


def _resolver(tmp_path: Path, *pods: PodAllocation) -> WorkloadResolver:
    resolver = WorkloadResolver(ProcReader(tmp_path))
    resolver.set_pods(pods)
    return resolver


def test_a_pod_with_a_plugin_gpu_and_a_claimed_one_is_attributed_on_both(tmp_path: Path) -> None:
    _proc(tmp_path, 10, UID_A)  # no HOSTNAME: found by the devices alone
    _proc(tmp_path, 11, UID_A)
    pod = PodAllocation("ml", "mixed", (ContainerAllocation(
        "main", (ContainerDevices("nvidia.com/gpu", ("GPU-1",)),),
        (ClaimAllocation("small", "ml", (CLAIMED,)),)),))
    resolver = _resolver(tmp_path, pod)
    on_mig, on_plugin = resolver.process(10), resolver.process(11)
    assert on_mig is not None and on_plugin is not None
    mig = resolver.workload(on_mig, MIG)
    plugin = resolver.workload(on_plugin, PLUGIN_GPU)
    assert (mig.pod_name, mig.container_name, mig.claim_name) == ("mixed", "main", "small")
    assert (plugin.pod_name, plugin.claim_name) == ("mixed", None)
    assert mig.claim_namespace is None  # the pod's own
    assert resolver.device_attributes(MIG) == (
        ("gpu.dra.driver", "gpu.nvidia.com"), ("gpu.dra.pool", "node-a"),
        ("gpu.dra.device", "gpu-2-mig-1g10gb-19-3"))
    assert resolver.device_attributes(PLUGIN_GPU) == ()


def test_a_claim_in_another_namespace_is_named_with_it(tmp_path: Path) -> None:
    _proc(tmp_path, 10, UID_A)
    pod = PodAllocation("ml", "infer", (ContainerAllocation("main", (), (
        ClaimAllocation("shared", "claims", (CLAIMED,)),)),))
    facts = (resolver := _resolver(tmp_path, pod)).process(10)
    assert facts is not None
    workload = resolver.workload(facts, MIG)
    assert (workload.claim_name, workload.claim_namespace) == ("shared", "claims")
    assert ("k8s.resourceclaim.namespace", "claims") in workload.attributes()


def test_two_pods_sharing_one_claim_are_told_apart_by_hostname(tmp_path: Path) -> None:
    _proc(tmp_path, 10, UID_A, "share-a")
    _proc(tmp_path, 11, UID_B)
    claim = ClaimAllocation("shared", "ml", (CLAIMED,))
    pods = [PodAllocation("ml", name, (ContainerAllocation("main", (), (claim,)),))
            for name in ("share-a", "share-b")]
    resolver = _resolver(tmp_path, *pods)
    a, b = resolver.process(10), resolver.process(11)
    assert a is not None and b is not None
    # Without HOSTNAME, two pods hold the device through the claim: no guess.
    assert resolver.workload(b, MIG).pod_name is None
    assert resolver.workload(a, MIG).claim_name == "shared"
    # Once share-a is bound by its HOSTNAME, share-b is the one unbound pod holding it.
    assert (resolver.workload(b, MIG).pod_name, resolver.workload(b, MIG).claim_name) == (
        "share-b", "shared")
    assert resolver.device_attributes(MIG)[2] == ("gpu.dra.device", CLAIMED.device)


def test_devices_claimed_under_different_names_carry_none(tmp_path: Path) -> None:
    other = ClaimDevice("gpu.nvidia.com", "node-b", "gpu-9", None, (), CLAIMED.device_ids)
    pods = [PodAllocation("ml", name, (ContainerAllocation("main", (), (
        ClaimAllocation(name, "ml", (device,)),)),)) for name, device in (
        ("a", CLAIMED), ("b", other))]
    assert _resolver(tmp_path, *pods).device_attributes(MIG) == ()


def test_the_memory_limit_of_a_claim_is_the_device_unless_shared(tmp_path: Path) -> None:
    gpu = GpuDevice("GPU-3", "", 80 * 1024 * 1024 * 1024)
    whole = ClaimDevice("gpu.nvidia.com", "node-a", "gpu-3", None, (), ("GPU-3",))
    shared = ClaimDevice("gpu.nvidia.com", "node-a", "gpu-3", "s1", (), ("GPU-3",))
    _proc(tmp_path, 10, UID_A)
    _proc(tmp_path, 11, UID_B, "share-b")

    def limit(*pods: PodAllocation, pid: int = 10) -> int | None:
        resolver = _resolver(tmp_path, *pods)
        facts = resolver.process(pid)
        assert facts is not None
        resolver.workload(facts, gpu)  # binds the pod
        return resolver.memory_limit(facts, gpu)

    def pod(name: str, device: ClaimDevice) -> PodAllocation:
        return PodAllocation("ml", name, (ContainerAllocation("main", (), (
            ClaimAllocation(name, "ml", (device,)),)),))

    assert limit(pod("solo", whole)) == gpu.memory_total  # a whole GPU, as a device plugin's
    assert limit(pod("solo", shared)) is None  # a share of it (share_id): not known
    # One claim, two pods (time-slicing): each has the GPU, neither a known share.
    assert limit(pod("share-a", whole), pod("share-b", whole), pid=11) is None
    mig = GpuDevice("MIG-7", "", 10 * 1024 * 1024 * 1024, ("MIG-GPU-2/3/0",))
    resolver = _resolver(tmp_path, pod("small", CLAIMED))
    facts = resolver.process(10)
    assert facts is not None and resolver.workload(facts, mig).pod_name == "small"
    assert resolver.memory_limit(facts, mig) == mig.memory_total  # the MIG device's memory


def _claimed_mig(gi: int, device: str) -> tuple[GpuDevice, ClaimDevice]:
    """MIG device ``gi`` of GPU-2 (its MIG- UUID and older id) and a claim of it by name."""
    child = GpuDevice(f"MIG-{gi}", "", None, (f"MIG-GPU-2/{gi}/0",))
    return child, ClaimDevice("gpu.nvidia.com", "node-a", device, None, (), (f"MIG-GPU-2/{gi}/0",))


def _claims(tmp_path: Path, *devices: ClaimDevice) -> WorkloadResolver:
    return _resolver(tmp_path, *(PodAllocation("ml", f"p{n}", (ContainerAllocation("main", (), (
        ClaimAllocation(f"c{n}", "ml", (d,)),)),)) for n, d in enumerate(devices)))


def test_only_the_claimed_mig_device_carries_its_dra_name_never_its_parent(
        tmp_path: Path) -> None:
    """Issue 28: one claimed MIG instance of a GPU labelled the whole GPU as that instance
    (its MIG-GPU-<parent>/gi/ci id matches the parent as a slice). With two claimed instances
    the parent's candidates disagreed and vanished, which hid it."""
    parent = GpuDevice("GPU-2", "00000000:1A:00.0")
    first, one = _claimed_mig(3, "gpu-2-mig-1g10gb-19-3")
    second, other = _claimed_mig(5, "gpu-2-mig-1g10gb-19-5")
    name = ("gpu.dra.device", "gpu-2-mig-1g10gb-19-3")
    # The lonely case: one claimed child.
    lonely = _claims(tmp_path, one)
    assert lonely.device_attributes(parent) == ()
    assert name in lonely.device_attributes(first)
    assert lonely.device_attributes(second) == ()
    # Two claims that agree (two pods share one claimed instance).
    agree = _claims(tmp_path, one, one)
    assert agree.device_attributes(parent) == ()
    assert name in agree.device_attributes(first)
    # Two that disagree (two instances claimed): each its own, the parent none.
    both = _claims(tmp_path, one, other)
    assert both.device_attributes(parent) == ()
    assert name in both.device_attributes(first)
    assert ("gpu.dra.device", "gpu-2-mig-1g10gb-19-5") in both.device_attributes(second)
    # None claimed.
    assert _claims(tmp_path).device_attributes(parent) == ()
    # A claim of the whole GPU still names it.
    whole = ClaimDevice("gpu.nvidia.com", "node-a", "gpu-2", None, (), ("GPU-2",))
    assert ("gpu.dra.device", "gpu-2") in _claims(tmp_path, whole).device_attributes(parent)
