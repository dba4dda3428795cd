"""The PID -> workload map over a /proc-shaped directory the test writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_otel_agent.workloads.devices import GpuDevice
from gpu_otel_agent.workloads.pods import ContainerAllocation, ContainerDevices, PodAllocation
from gpu_otel_agent.workloads.procfs import ProcReader
from gpu_otel_agent.workloads.resolver import (
    MIB,
    MPS_LIMIT_ENV,
    WorkloadResolver,
    mps_limit,
)

UID_A = "aaaaaaaa-1111-2222-3333-444455556666"
UID_B = "bbbbbbbb-1111-2222-3333-444455556666"
GPU = GpuDevice("GPU-0", "00000000:18:00.0", 80 * 1024 * MIB)


def _proc(root: Path, pid: int, uid: str, hostname: str = "", env: str = "") -> None:
    base = root / str(pid)
    base.mkdir(parents=True)
    (base / "cgroup").write_text(f"0::/kubepods/burstable/pod{uid}/{'c' * 64}\n")
    (base / "comm").write_bytes(b"python\n")
    (base / "stat").write_text(f"{base.name} (a (b) c) S 1 1 1\n")
    environ = b"PATH=/bin\0" + (f"HOSTNAME={hostname}\0".encode() if hostname else b"")
    (base / "environ").write_bytes(environ + env.encode())


def _pod(name: str, *ids: str) -> PodAllocation:
    return PodAllocation("ml", name, (ContainerAllocation(
        "main", (ContainerDevices("nvidia.com/gpu", ids),)),))


def test_hostname_binds_the_pod_even_on_a_shared_gpu(tmp_path: Path) -> None:
    _proc(tmp_path, 10, UID_A, "trainer-a")
    resolver = WorkloadResolver(ProcReader(tmp_path))
    resolver.set_pods((_pod("trainer-a", "GPU-0::1"), _pod("trainer-b", "GPU-0::2")))
    facts = resolver.process(10)
    assert facts is not None
    workload = resolver.workload(facts, GPU)
    assert (workload.pod_name, workload.container_name, workload.pod_uid) == (
        "trainer-a", "main", UID_A)


def test_ambiguous_allocation_without_hostname_stays_unnamed(tmp_path: Path) -> None:
    _proc(tmp_path, 10, UID_A)
    resolver = WorkloadResolver(ProcReader(tmp_path))
    resolver.set_pods((_pod("trainer-a", "GPU-0::1"), _pod("trainer-b", "GPU-0::2")))
    facts = resolver.process(10)
    assert facts is not None
    workload = resolver.workload(facts, GPU)
    assert workload.pod_name is None and workload.pod_uid == UID_A


def test_single_allocated_pod_binds_without_hostname(tmp_path: Path) -> None:
    _proc(tmp_path, 10, UID_A)
    _proc(tmp_path, 11, UID_B)
    resolver = WorkloadResolver(ProcReader(tmp_path))
    resolver.set_pods((_pod("trainer-a", "GPU-0"), _pod("other", "GPU-9")))
    a, b = resolver.process(10), resolver.process(11)
    assert a is not None and b is not None
    assert resolver.workload(a, GPU).pod_name == "trainer-a"
    assert resolver.workload(b, GPU).pod_name is None  # trainer-a is taken by UID_A
    assert resolver.memory_limit(a, GPU) == GPU.memory_total


def test_exit_removes_and_exec_rereads(tmp_path: Path) -> None:
    _proc(tmp_path, 10, UID_A)
    resolver = WorkloadResolver(ProcReader(tmp_path))
    changes: list[int] = []
    resolver.subscribe(lambda: changes.append(1))
    assert resolver.process(10) is not None
    resolver.on_exit(999)  # not a GPU process: nothing happens
    assert changes == []
    resolver.on_exit(10)
    assert resolver.process(10) is None and changes == [1]
    resolver.on_exec(10)  # the PID was reused by a new program
    assert resolver.process(10) is not None
    assert resolver.resolutions == 2


def test_the_watched_pids_are_the_ones_whose_events_matter(tmp_path: Path) -> None:
    # The event source is told which PIDs to let through: held GPU PIDs, and exited ones
    # (their PID's reuse by a fork or exec must reach on_fork / on_exec), nothing else.
    _proc(tmp_path, 10, UID_A)
    _proc(tmp_path, 11, UID_B)
    resolver = WorkloadResolver(ProcReader(tmp_path))
    told: list[frozenset[int]] = []
    resolver.on_watched(told.append)
    assert told == [frozenset()]
    resolver.process(10)
    resolver.process(11)
    resolver.process(10)  # already held: no new filter
    assert told[1:] == [frozenset({10}), frozenset({10, 11})]
    resolver.on_exit(10)  # exited: still watched, for a reuse of the PID
    resolver.on_fork(10)  # reused by a new process: no longer ours
    resolver.retain({11})
    assert told[3:] == [frozenset({11})]
    resolver.retain(set())
    assert told[-1] == frozenset()


def test_a_batch_of_new_pids_tells_the_watchers_once(tmp_path: Path) -> None:
    """A list of N new processes rebuilds the event filter once, not N times (O(N²) at
    2,048 processes); the watchers end with the same set as one lookup at a time gives."""
    pids = range(10, 30)
    for pid in pids:
        _proc(tmp_path, pid, UID_A)
    one_by_one = WorkloadResolver(ProcReader(tmp_path))
    separately: list[frozenset[int]] = []
    one_by_one.on_watched(separately.append)
    for pid in pids:
        one_by_one.process(pid)
    resolver = WorkloadResolver(ProcReader(tmp_path))
    told: list[frozenset[int]] = []
    resolver.on_watched(told.append)
    with resolver.batched():
        with resolver.batched():  # nested: told when the outer block ends
            resolver.process(10)
        assert told == [frozenset()]
        for pid in pids:
            assert resolver.process(pid) == one_by_one.process(pid)
        assert told == [frozenset()]
    assert len(separately) == len(pids) + 1
    assert told == [frozenset(), separately[-1]] and told[-1] == frozenset(pids)
    with resolver.batched():
        resolver.process(10)  # nothing new: nobody is told
    assert len(told) == 2
    resolver.on_exit(10)  # outside a batch: at once, as before
    resolver.on_fork(10)
    assert told[-1] == frozenset(pids) - {10}


def test_a_move_into_a_pod_is_found_from_the_cgroup_file_alone(tmp_path: Path) -> None:
    # A process outside any pod, then moved into one (a container runtime does this): the new
    # cgroup is picked up when a pod cgroup appears and at reconciliation, from /proc/PID/cgroup
    # alone; the process's other files are not read again (resolutions counts full reads).
    _proc(tmp_path, 10, UID_A)
    (tmp_path / "10" / "cgroup").write_text("0::/user.slice/session-1.scope\n")
    resolver = WorkloadResolver(ProcReader(tmp_path))
    first = resolver.process(10)
    assert first is not None and not first.cgroup.known
    (tmp_path / "10" / "cgroup").write_text(f"0::/kubepods/burstable/pod{UID_A}/{'c' * 64}\n")
    resolver.on_cgroup_change()
    moved = resolver.process(10)
    assert moved is not None and moved.cgroup.pod_uid == UID_A
    assert moved.executable == first.executable == "python"
    (tmp_path / "10" / "cgroup").write_text(f"0::/kubepods/burstable/pod{UID_B}/{'d' * 64}\n")
    resolver.reconcile()
    again = resolver.process(10)
    assert again is not None and again.cgroup.pod_uid == UID_B
    assert resolver.resolutions == 1


def test_reconcile_finds_exits_the_events_missed(tmp_path: Path) -> None:
    _proc(tmp_path, 10, UID_A)
    resolver = WorkloadResolver(ProcReader(tmp_path))
    assert resolver.process(10) is not None
    for child in (tmp_path / "10").iterdir():
        child.unlink()
    (tmp_path / "10").rmdir()
    resolver.reconcile()
    assert resolver.process(10) is None


def test_mps_limit_from_the_environment(tmp_path: Path) -> None:
    _proc(tmp_path, 10, UID_A, env=f"{MPS_LIMIT_ENV}=0=2G\0")
    resolver = WorkloadResolver(ProcReader(tmp_path, frozenset({MPS_LIMIT_ENV})))
    facts = resolver.process(10)
    assert facts is not None
    assert resolver.memory_limit(facts, GPU) == 2048 * MIB


@pytest.mark.parametrize(("value", "gpus", "expected"), [
    ("512M", 1, 512 * MIB), ("0=1G,1=2G", 1, 1024 * MIB), ("0=1G,1=2G", 2, None),
    ("1.5G", 3, 1536 * MIB), ("lots", 1, None),
])
def test_mps_limit_formats(value: str, gpus: int, expected: int | None) -> None:
    assert mps_limit(value, gpus) == expected


def test_a_zombie_has_exited(tmp_path: Path) -> None:
    _proc(tmp_path, 10, UID_A)
    resolver = WorkloadResolver(ProcReader(tmp_path))
    assert resolver.process(10) is not None
    resolver.reconcile()
    assert resolver.process(10) is not None  # still running
    (tmp_path / "10" / "stat").write_text("10 (a (b) c) Z 1 1 1\n")
    resolver.reconcile()
    assert resolver.process(10) is None


@pytest.mark.parametrize("allocated", ["MIG-1111", "MIG-GPU-0/2/0"])
def test_a_mig_device_is_found_by_either_id_and_its_memory_is_the_limit(
        tmp_path: Path, allocated: str) -> None:
    # The partition is sampled as a device of its own: its UUID, its older alias.
    instance = GpuDevice("MIG-1111", "", 10 * 1024 * MIB, ("MIG-GPU-0/2/0",))
    other = GpuDevice("MIG-2222", "", 10 * 1024 * MIB, ("MIG-GPU-0/3/0",))
    _proc(tmp_path, 10, UID_A)
    resolver = WorkloadResolver(ProcReader(tmp_path))
    resolver.set_pods((_pod("small", allocated), _pod("whole", "GPU-0")))
    facts = resolver.process(10)
    assert facts is not None
    assert resolver.workload(facts, other).pod_name is None  # another instance's pod is not it
    assert resolver.workload(facts, instance).pod_name == "small"
    assert resolver.memory_limit(facts, instance) == 10 * 1024 * MIB  # the instance's, whole
