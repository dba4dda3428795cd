"""A partitioned AMD GPU as a device tree: the physical GPU and its compute partitions.

The parent reads what is physical through the primary partition's handle (XCP 0: amdsmi
"equates Processor 0 (XCP 0) with the physical device", ROCm/rocm-systems PR 6701), so socket
power and energy are counted once, not once per partition. Each partition is an
:class:`~.device.AmdDevice` of its own with ``hw.parent``, its partition id and the compute and
memory partition modes, serving its VRAM share, activity and processes.

The partitions are fixed for the life of the amdsmi session: changing the compute or memory
partition mode reloads amdgpu, which invalidates every processor handle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpu_otel_agent.backends.protocol import Device
from gpu_otel_agent.model.snapshot import DeviceIdentity, DevicePartition
from gpu_otel_agent.plugins.amd import topology
from gpu_otel_agent.plugins.amd.device import AmdDevice, Scope

PARTITION_KIND = "amd_partition"


class AmdPartitionedGpu(AmdDevice):
    """The physical GPU of a partitioned MI300X (a :class:`Partitioned` device)."""

    def __init__(self, smi: Any, socket: topology.Socket, identity: DeviceIdentity,
                 partitions: Sequence[AmdDevice]) -> None:
        super().__init__(smi, socket.primary.handle, identity, scope=Scope.SOCKET)
        self._partitions = tuple(partitions)

    def partitions(self) -> tuple[Device, ...]:
        return self._partitions

    @property
    def partition_devices(self) -> tuple[AmdDevice, ...]:
        return self._partitions


def build(smi: Any, socket: topology.Socket, index: int,
          every: Sequence[topology.Processor]) -> AmdPartitionedGpu:
    """The tree of one partitioned socket; ``every`` is all processors of the node (a
    partition's UUID names it only where no other processor reports the same one)."""
    primary = socket.primary
    parent = topology.parent_id(socket)
    identity = DeviceIdentity(uuid=parent, index=index, vendor="amd", model=primary.model,
                              pci_bus_id=primary.bdf)
    names = topology.partition_ids(every, socket, parent)
    partitions = []
    for position, (processor, name) in enumerate(zip(socket.processors, names, strict=True)):
        number = topology.partition_id(processor, position)
        compute = processor.compute_mode or "unknown"
        attributes: list[tuple[str, str | int]] = [
            ("amd.partition.id", number), ("amd.partition.compute_mode", compute)]
        if processor.memory_mode is not None:
            attributes.append(("amd.partition.memory_mode", processor.memory_mode))
        # A device plugin may name a partition by its BDF or (newer libraries) its UUID.
        allocation = (processor.bdf,) if name != processor.uuid else (processor.bdf, name)
        place = DevicePartition(parent, PARTITION_KIND, compute, tuple(attributes), allocation)
        partitions.append(AmdDevice(
            smi, processor.handle,
            DeviceIdentity(uuid=name, index=index, vendor="amd", model=processor.model,
                           pci_bus_id=processor.bdf, partition=place),
            scope=Scope.PARTITION))
    return AmdPartitionedGpu(smi, socket, identity, partitions)
