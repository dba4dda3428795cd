"""What the kubelet says about pods, as the resolver uses it (the source is a plugin)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ContainerDevices:
    resource_name: str
    device_ids: tuple[str, ...]


@dataclass(frozen=True)
class ContainerAllocation:
    name: str
    devices: tuple[ContainerDevices, ...] = ()


@dataclass(frozen=True)
class PodAllocation:
    """One pod of the kubelet's pod-resources answer (it carries no UID: see matching)."""

    namespace: str
    name: str
    containers: tuple[ContainerAllocation, ...] = ()
