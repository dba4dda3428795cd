"""What the kubelet says about pods, as the resolver uses it (the source is a plugin)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ContainerDevices:
    resource_name: str
    device_ids: tuple[str, ...]


@dataclass(frozen=True)
class ClaimDevice:
    """One device of a DRA ResourceClaim (pod-resources ``ClaimResource``).

    ``driver``/``pool``/``device`` name the device as the DRA driver published it (NVIDIA's:
    ``gpu.nvidia.com``, the node name, ``gpu-0`` or ``gpu-0-mig-...``). ``device_ids`` is what
    the source could tie it to on the node, in the ids device plugins use (``GPU-<uuid>``,
    ``MIG-GPU-<uuid>/<gi>/<ci>``), so it matches the GPUs we sample the same way; empty when
    it could not (another driver, no CDI spec on the node).
    """

    driver: str
    pool: str
    device: str
    share_id: str | None = None
    cdi_devices: tuple[str, ...] = ()
    device_ids: tuple[str, ...] = ()


@dataclass(frozen=True)
class ClaimAllocation:
    """A ResourceClaim a container uses (pod-resources ``DynamicResource``)."""

    name: str
    namespace: str
    devices: tuple[ClaimDevice, ...] = ()


@dataclass(frozen=True)
class ContainerAllocation:
    name: str
    devices: tuple[ContainerDevices, ...] = ()
    claims: tuple[ClaimAllocation, ...] = ()


@dataclass(frozen=True)
class PodAllocation:
    """One pod of the kubelet's pod-resources answer (it carries no UID: see matching)."""

    namespace: str
    name: str
    containers: tuple[ContainerAllocation, ...] = ()
