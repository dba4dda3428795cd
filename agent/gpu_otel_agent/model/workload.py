"""Who is on a GPU: the seam between the workload resolver and everything that reports it.

The resolver (PID -> cgroup -> container -> pod / batch job) fills these in; metrics and health
events only read them. Every field is optional because each is known only on some nodes: a
bare-metal Slurm node has no pods, a container without a kubelet socket has no pod name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from gpu_otel_agent.model.snapshot import Attributes


@dataclass(frozen=True, slots=True)
class Workload:
    """The container, pod or batch job a process belongs to, each part only where known."""

    container_id: str | None = None
    pod_uid: str | None = None
    pod_name: str | None = None
    namespace: str | None = None
    container_name: str | None = None
    slurm_job_id: str | None = None
    # The DRA ResourceClaim the container holds this GPU through; its namespace only where it
    # differs from the pod's.
    claim_name: str | None = None
    claim_namespace: str | None = None

    def attributes(self) -> Attributes:
        """The workload attributes of ../shared/specs/telemetry.md, known ones only."""
        pairs = (
            ("container.id", self.container_id),
            ("k8s.namespace.name", self.namespace),
            ("k8s.pod.name", self.pod_name),
            ("k8s.pod.uid", self.pod_uid),
            ("k8s.container.name", self.container_name),
            ("slurm.job.id", self.slurm_job_id),
            ("k8s.resourceclaim.name", self.claim_name),
            ("k8s.resourceclaim.namespace", self.claim_namespace),
        )
        return tuple((key, value) for key, value in pairs if value is not None)


@dataclass(frozen=True, slots=True)
class GpuProcess:
    """A process holding a GPU, as health events report it."""

    pid: int
    executable: str  # sanitised executable name, "" when the process is already gone
    workload: Workload = Workload()


class WorkloadLookup(Protocol):
    """What is running on a GPU right now (health events attach it to every event)."""

    def processes_on(self, uuid: str) -> tuple[GpuProcess, ...]: ...
