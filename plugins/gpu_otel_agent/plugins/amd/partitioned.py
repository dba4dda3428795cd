"""A partitioned AMD GPU as a device tree: the physical GPU and its compute partitions.

The parent reads what is physical through the primary partition's handle (XCP 0: amdsmi
"equates Processor 0 (XCP 0) with the physical device", ROCm/rocm-systems PR 6701), so socket
power, energy, activity and VRAM use are counted once, not once per partition. Each partition
is an :class:`~.device.AmdDevice` of its own with ``hw.parent``, its partition id and the
compute and memory partition modes, serving what the part measures per partition (see
:mod:`.partition_readings`) and its processes.

Older libraries answer the partition-mode queries on XCP 0 only ("N/A" on the others in
amd-smi on ROCm 6.4.1 and 7.0.1): a partition without its own answer carries XCP 0's modes,
which are the socket's.

The partitions are fixed for the life of the amdsmi session: changing the compute or memory
partition mode reloads amdgpu, which invalidates every processor handle.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gpu_otel_agent.backends.protocol import Device
from gpu_otel_agent.model.snapshot import DeviceIdentity, DevicePartition
from gpu_otel_agent.plugins.amd import partition_readings, topology
from gpu_otel_agent.plugins.amd.device import AmdDevice, Scope

PARTITION_KIND = "amd_partition"


class AmdPartitionedGpu(AmdDevice):
    """The physical GPU of a partitioned MI300X (a :class:`Partitioned` device)."""

    def __init__(self, smi: Any, socket: topology.Socket, identity: DeviceIdentity,
                 partitions: Sequence[AmdDevice], vram: partition_readings.SocketVram) -> None:
        super().__init__(smi, socket.primary.handle, identity, scope=Scope.SOCKET,
                         groups=partition_readings.socket_groups(vram))
        self._partitions = tuple(partitions)

    def partitions(self) -> tuple[Device, ...]:
        return self._partitions

    @property
    def partition_devices(self) -> tuple[AmdDevice, ...]:
        return self._partitions


def build(smi: Any, socket: topology.Socket, index: int,
          every: Sequence[topology.Processor], *, driver: str = "",
          serial: str = "") -> AmdPartitionedGpu:
    """The tree of one partitioned socket; ``every`` is all processors of the node (a
    partition's UUID names it only where no other processor reports the same one)."""
    primary = socket.primary
    parent = topology.parent_id(socket)
    identity = DeviceIdentity(uuid=parent, index=index, vendor="amd", model=primary.model,
                              pci_bus_id=primary.bdf, driver_version=driver,
                              serial_number=serial)
    names = topology.partition_ids(every, socket, parent)
    socket_compute = next((p.compute_mode for p in socket.processors if p.compute_mode), None)
    vram = partition_readings.SocketVram(
        smi, tuple(p.handle for p in socket.processors), partition_readings.library_splits(smi),
        partition_readings.mode_partitions(socket_compute, primary.model,
                                           len(socket.processors)))
    table = partition_readings.SharedTable(smi, primary.handle)
    own_memory = partition_readings.library_at_least(
        smi, partition_readings.PARTITION_MEMORY_FROM)
    socket_memory = next((p.memory_mode for p in socket.processors if p.memory_mode), None)
    partitions = []
    for position, (processor, name) in enumerate(zip(socket.processors, names, strict=True)):
        number = topology.partition_id(processor, position)
        compute = processor.compute_mode or socket_compute or "unknown"
        memory = processor.memory_mode or socket_memory
        attributes: list[tuple[str, str | int]] = [
            ("amd.partition.id", number), ("amd.partition.compute_mode", compute)]
        if memory is not None:
            attributes.append(("amd.partition.memory_mode", memory))
        # A device plugin may name a partition by its BDF or (newer libraries) its UUID.
        allocation = (processor.bdf,) if processor.uuid == parent else (
            processor.bdf, processor.uuid)
        place = DevicePartition(parent, PARTITION_KIND, compute, tuple(attributes), allocation)
        partitions.append(AmdDevice(
            smi, processor.handle,
            DeviceIdentity(uuid=name, index=index, vendor="amd", model=processor.model,
                           pci_bus_id=processor.bdf, partition=place,
                           driver_version=driver),
            scope=Scope.PARTITION,
            groups=partition_readings.partition_groups(number, position, table, vram,
                                                       own_memory)))
    return AmdPartitionedGpu(smi, socket, identity, partitions, vram)
