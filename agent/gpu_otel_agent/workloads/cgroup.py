"""Container, pod and Slurm job identities from a process's cgroup path.

Handles what kubelets and runtimes actually write:

- cgroup v2 (``0::/path``) and v1 (one line per hierarchy; the first line that names a
  workload wins, in the order systemd, pids, memory, cpu, then the rest);
- the systemd driver (``kubepods.slice/kubepods-burstable.slice/
  kubepods-burstable-pod<uid with _>.slice/cri-containerd-<id>.scope``) and the cgroupfs
  driver (``kubepods/burstable/pod<uid>/<id>``);
- the three QoS layouts: guaranteed pods directly under ``kubepods``, burstable and besteffort
  under their own level;
- runtime naming: ``cri-containerd-``, ``crio-``, ``docker-``, ``libpod-`` (podman) scopes, a
  bare 64-hex id (cgroupfs), ``/docker/<id>``, and ``libpod-<id>.scope/container``;
- Slurm: ``.../job_<id>/step_<n>/...`` (cgroup/v2 plugin) and ``/slurm[_host]/uid_<u>/
  job_<id>/...`` (v1).

A path nested in another (kind or a node inside docker) yields its innermost pod.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEX_ID = re.compile(r"^[0-9a-f]{64}$")
_SCOPE = re.compile(
    r"^(?:cri-containerd|crio|docker|libpod|containerd)-([0-9a-f]{64})(?:\.scope)?$"
)
_CONMON = re.compile(r"^crio-conmon-([0-9a-f]{64})\.scope$")
_UID = r"[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12}"
_POD_CGROUPFS = re.compile(rf"^pod({_UID})$")
_POD_SYSTEMD = re.compile(rf"^kubepods(?:-(?:burstable|besteffort))?-pod({_UID})\.slice$")
_JOB = re.compile(r"^job_(\d+)$")
_QOS = {"burstable": "burstable", "besteffort": "besteffort"}

# v1 hierarchies in the order their paths are trusted (the systemd one is what the systemd
# cgroup driver names; the others follow it, and any hierarchy will do after them).
_V1_PREFERENCE = ("name=systemd", "pids", "memory", "cpu,cpuacct", "cpu", "cpuacct", "devices")


@dataclass(frozen=True, slots=True)
class CgroupIdentity:
    """What a cgroup path says about a process; each part only where the path names it."""

    path: str = ""
    container_id: str | None = None
    pod_uid: str | None = None
    qos: str | None = None  # guaranteed | burstable | besteffort, for kubepods paths
    slurm_job_id: str | None = None

    @property
    def known(self) -> bool:
        return bool(self.container_id or self.pod_uid or self.slurm_job_id)


def parse_path(path: str) -> CgroupIdentity:
    """The identity one cgroup path names."""
    parts = [p for p in path.split("/") if p]
    pod_uid = None
    qos = None
    container_id = None
    job = None
    pod_at = -1
    for i, part in enumerate(parts):
        match = _POD_CGROUPFS.match(part) or _POD_SYSTEMD.match(part)
        if match:
            pod_uid = match.group(1).replace("_", "-")
            pod_at = i
            container_id = None  # a pod nested deeper wins (kind, node in a container)
            qos = "guaranteed"
            parent = parts[i - 1] if i else ""
            for name, value in _QOS.items():
                if name in parent or f"kubepods-{name}-" in part:
                    qos = value
            continue
        job_match = _JOB.match(part)
        if job_match:
            job = job_match.group(1)
            continue
        if pod_uid is not None and i > pod_at and container_id is None:
            container_id = _container(part)
    if pod_uid is None:
        # Plain containers (docker, podman) outside Kubernetes: the innermost id found.
        for i, part in enumerate(parts):
            found = _container(part)
            if found is None and part == "docker" and i + 1 < len(parts):
                found = _container(parts[i + 1])
            if found is not None:
                container_id = found
    return CgroupIdentity(path=path, container_id=container_id, pod_uid=pod_uid, qos=qos,
                          slurm_job_id=job)


def _container(part: str) -> str | None:
    if _CONMON.match(part):
        return None  # CRI-O's monitor process is not the container
    match = _SCOPE.match(part)
    if match:
        return match.group(1)
    if _HEX_ID.match(part):
        return part
    return None


def parse_proc_cgroup(text: str) -> CgroupIdentity:
    """The identity of a ``/proc/PID/cgroup`` file (v1, v2 or hybrid)."""
    by_hierarchy: dict[str, str] = {}
    for line in text.splitlines():
        fields = line.split(":", 2)
        if len(fields) != 3:
            continue
        _, controllers, path = fields
        by_hierarchy.setdefault(controllers or "", path)
    order = [""] + [h for h in _V1_PREFERENCE if h in by_hierarchy]
    order += sorted(h for h in by_hierarchy if h not in order)
    fallback = CgroupIdentity(path=by_hierarchy.get("", next(iter(by_hierarchy.values()), "")))
    for hierarchy in order:
        if hierarchy not in by_hierarchy:
            continue
        identity = parse_path(by_hierarchy[hierarchy])
        if identity.known:
            return identity
    return fallback
