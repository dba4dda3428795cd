"""Matching the device ids a device plugin allocated to the GPUs we sample.

NVIDIA's device plugin hands out whole GPUs by UUID (``GPU-…``), time-sliced or MPS replicas as
``GPU-…::N``, and MIG devices as ``MIG-GPU-<parent uuid>/<gi>/<ci>`` (older drivers) or
``MIG-<uuid>`` (newer ones, which name no parent). A MIG device is sampled as a device of its
own (a partition of its GPU), so both forms match it whole: the first as an alias the backend
gives, the second as its UUID. AMD's plugin uses PCI bus ids, which we also accept, in any spelling
(:mod:`gpu_otel_agent.model.pci`).
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_otel_agent.model.pci import pci_key


@dataclass(frozen=True)
class DeviceMatch:
    whole: bool  # the id is the whole GPU (not a replica nor a MIG slice)


def match(device_id: str, uuid: str, pci_bus_id: str = "",
          aliases: tuple[str, ...] = ()) -> DeviceMatch | None:
    """How ``device_id`` relates to the GPU ``uuid``, or None when it is another device.

    ``aliases`` are other whole-device ids of ``uuid`` (a MIG device's ``MIG-GPU-…/gi/ci``
    when ``uuid`` is its ``MIG-<uuid>``): a MIG device is a device of its own.
    """
    if device_id == uuid or device_id in aliases:
        return DeviceMatch(whole=True)
    if device_id.startswith(uuid + "::"):
        return DeviceMatch(whole=False)
    if device_id.startswith("MIG-" + uuid + "/"):
        return DeviceMatch(whole=False)
    if pci_bus_id and (key := pci_key(device_id)) is not None and key == pci_key(pci_bus_id):
        return DeviceMatch(whole=True)
    return None


@dataclass(frozen=True)
class GpuDevice:
    """A GPU (or partition) as allocations are matched against it."""

    uuid: str
    pci_bus_id: str = ""
    memory_total: int | None = None  # bytes, for a whole-GPU (or whole-partition) allocation
    aliases: tuple[str, ...] = ()  # other ids the device is allocated by (a MIG device's)

    def matches(self, device_id: str) -> bool:
        return match(device_id, self.uuid, self.pci_bus_id, self.aliases) is not None

    def is_whole(self, device_id: str) -> bool:
        found = match(device_id, self.uuid, self.pci_bus_id, self.aliases)
        return found is not None and found.whole
