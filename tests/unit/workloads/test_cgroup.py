"""Cgroup paths as kubelets, runtimes and Slurm write them."""

from __future__ import annotations

import pytest

from gpu_otel_agent.workloads.cgroup import parse_path, parse_proc_cgroup

UID = "1a2b3c4d-1111-2222-3333-444455556666"
UNDERSCORED = UID.replace("-", "_")
CID = "0123456789abcdef" * 4


@pytest.mark.parametrize(
    ("path", "qos"),
    [
        # cgroupfs driver, the three QoS layouts
        (f"/kubepods/pod{UID}/{CID}", "guaranteed"),
        (f"/kubepods/burstable/pod{UID}/{CID}", "burstable"),
        (f"/kubepods/besteffort/pod{UID}/{CID}", "besteffort"),
        # systemd driver, containerd / CRI-O / docker naming
        (f"/kubepods.slice/kubepods-pod{UNDERSCORED}.slice/cri-containerd-{CID}.scope",
         "guaranteed"),
        (f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UNDERSCORED}.slice/"
         f"crio-{CID}.scope", "burstable"),
        (f"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod{UNDERSCORED}"
         f".slice/docker-{CID}.scope", "besteffort"),
        # kind / a node inside a container: the innermost pod counts
        (f"/docker/{'f' * 64}/kubelet.slice/kubelet-kubepods.slice/"
         f"kubelet-kubepods-burstable.slice/kubepods-burstable-pod{UNDERSCORED}.slice/"
         f"cri-containerd-{CID}.scope", "burstable"),
        # a private cgroup namespace shows paths outside it relative to its root
        (f"/../../kubepods/burstable/pod{UID}/{CID}", "burstable"),
    ],
)
def test_kubernetes_paths(path: str, qos: str) -> None:
    identity = parse_path(path)
    assert (identity.pod_uid, identity.container_id, identity.qos) == (UID, CID, qos)


def test_pod_level_cgroup_has_no_container() -> None:
    identity = parse_path(f"/kubepods/burstable/pod{UID}")
    assert (identity.pod_uid, identity.container_id) == (UID, None)


def test_crio_conmon_is_not_the_container() -> None:
    path = (f"/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UNDERSCORED}"
            f".slice/crio-conmon-{CID}.scope")
    assert parse_path(path).container_id is None
    assert parse_path(path).pod_uid == UID


@pytest.mark.parametrize(
    "path",
    [f"/docker/{CID}", f"/system.slice/docker-{CID}.scope",
     f"/machine.slice/libpod-{CID}.scope/container", f"/user.slice/libpod-{CID}.scope"],
)
def test_plain_containers(path: str) -> None:
    identity = parse_path(path)
    assert (identity.container_id, identity.pod_uid) == (CID, None)


@pytest.mark.parametrize(
    "path",
    ["/system.slice/slurmstepd.scope/job_4242/step_0/user/task_0",
     "/slurm/uid_1000/job_4242/step_batch/task_0",
     "/slurm_node07/uid_1000/job_4242/step_0"],
)
def test_slurm_jobs(path: str) -> None:
    assert parse_path(path).slurm_job_id == "4242"


@pytest.mark.parametrize("path", ["/", "/user.slice/user-0.slice/session-3.scope",
                                  "/system.slice/sshd.service", "/kubepods/burstable"])
def test_host_paths_name_no_workload(path: str) -> None:
    assert not parse_path(path).known


def test_v2_file() -> None:
    text = f"0::/kubepods/burstable/pod{UID}/{CID}\n"
    assert parse_proc_cgroup(text).container_id == CID


def test_v1_file_prefers_a_hierarchy_that_names_the_workload() -> None:
    text = (
        "12:memory:/\n"
        f"11:pids:/kubepods/besteffort/pod{UID}/{CID}\n"
        "1:name=systemd:/\n"
        "0::/\n"
    )
    identity = parse_proc_cgroup(text)
    assert (identity.pod_uid, identity.qos) == (UID, "besteffort")


def test_garbage_file_is_no_workload() -> None:
    assert not parse_proc_cgroup("nonsense\n\n::::\n").known
