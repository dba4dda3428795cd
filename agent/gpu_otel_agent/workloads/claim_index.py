"""Which listed DRA claims hold a GPU, as the resolver asks it (one index per pod list).

The source (a plugin) ties each claimed device to the ids device plugins use, so a claimed
device matches the GPUs and MIG devices we sample as an allocated id does. The index answers,
per device and for as long as the pod list stands, who holds it through a claim: the claim of
a container (for ``k8s.resourceclaim.*``), the DRA device it is (``gpu.dra.*`` on the device's
own series) and whether one pod holds it whole (its memory is then the container's limit).
"""

from __future__ import annotations

from gpu_otel_agent.model.snapshot import Attributes
from gpu_otel_agent.workloads.devices import GpuDevice
from gpu_otel_agent.workloads.names import sanitize
from gpu_otel_agent.workloads.pods import (
    ClaimAllocation,
    ClaimDevice,
    ContainerAllocation,
    PodAllocation,
)


def claimed(device: ClaimDevice, gpu: GpuDevice) -> bool:
    return any(gpu.matches(i) for i in device.device_ids)


def holds(container: ContainerAllocation, gpu: GpuDevice) -> bool:
    """Allocated by a device plugin or through a claim: a pod may hold GPUs both ways."""
    return any(gpu.matches(i) for d in container.devices for i in d.device_ids) or any(
        claimed(d, gpu) for claim in container.claims for d in claim.devices)


def claim_on(container: ContainerAllocation, gpu: GpuDevice) -> ClaimAllocation | None:
    """The one claim through which ``container`` holds ``gpu``, if it is one."""
    found = {(c.name, c.namespace): c for c in container.claims
             if any(claimed(d, gpu) for d in c.devices)}
    return next(iter(found.values())) if len(found) == 1 else None


class ClaimIndex:
    def __init__(self, pods: tuple[PodAllocation, ...]) -> None:
        self._pods = pods
        self._holders: dict[GpuDevice, dict[ClaimDevice, int]] = {}

    def holders(self, gpu: GpuDevice) -> dict[ClaimDevice, int]:
        """The claimed devices that are ``gpu``, each with how many pods hold it (computed at
        the first question per device: later ones are dictionary hits)."""
        found = self._holders.get(gpu)
        if found is None:
            pods: dict[ClaimDevice, set[tuple[str, str]]] = {}
            for pod in self._pods:
                for device in (d for c in pod.containers for claim in c.claims
                               for d in claim.devices):
                    if claimed(device, gpu):
                        pods.setdefault(device, set()).add((pod.namespace, pod.name))
            found = {device: len(names) for device, names in pods.items()}
            self._holders[gpu] = found
        return found

    def device_attributes(self, gpu: GpuDevice) -> Attributes:
        """The DRA device the listed claims hold ``gpu`` as (driver, pool, device name): one
        value for all of them, or none (no claim, or claims that disagree).

        Only a claim of ``gpu`` itself counts: a claimed MIG device's ``MIG-GPU-<uuid>/gi/ci``
        id also matches its parent GPU (as a slice of it), and the whole GPU is not that
        claimed device -- its series would carry the instance's name whenever exactly one of
        its instances is claimed."""
        found = {(d.driver, d.pool, d.device) for d in self.holders(gpu)
                 if any(gpu.is_whole(i) for i in d.device_ids)}
        if len(found) != 1:
            return ()
        driver, pool, name = found.pop()
        return tuple((key, sanitize(value)) for key, value in (
            ("gpu.dra.driver", driver), ("gpu.dra.pool", pool), ("gpu.dra.device", name))
            if value)

    def whole(self, container: ContainerAllocation, gpu: GpuDevice) -> bool:
        """``container`` holds all of ``gpu`` through a claim: the claimed device is the GPU or
        MIG device itself and not shared (no ``share_id``, one pod holding it)."""
        mine = [d for c in container.claims for d in c.devices if claimed(d, gpu)]
        holders = self.holders(gpu)
        return bool(mine) and all(
            d.share_id is None and holders.get(d, 0) == 1
            and any(gpu.is_whole(i) for i in d.device_ids) for d in mine)
