"""The partitions of one physical device (MIG instances, AMD partitions), read on its worker.

A partitioned device is sampled as a tree in one job on the parent's thread, under the parent's
deadline: the parent's group read first, then (when due) a fresh enumeration of its partitions,
then the same group of every partition. One job per cycle keeps "one NVML thread per physical
GPU" and lets a partition serve what the parent's read fetched for all (one process list).
What runs here runs on the worker thread; the sampler applies the result on the event loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from gpu_otel_agent.backends.protocol import Device, DeviceLost, Partitioned, PartitionGone
from gpu_otel_agent.model.snapshot import DeviceSnapshot

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class PartitionState:
    """A partition as the sampler holds it (event loop only)."""

    device: Device
    groups: frozenset[str]
    snapshot: DeviceSnapshot


@dataclass(frozen=True)
class Enumerated:
    """The partitions found now; ``probed`` has the groups of those not known before."""

    devices: tuple[Device, ...]
    probed: Mapping[str, frozenset[str]]


@dataclass(frozen=True)
class TreeRead(Generic[T]):
    """One group read of a device and its partitions (``None``: the parent has no such group)."""

    parent: T | None
    enumerated: Enumerated | None = None
    partitions: Mapping[str, T] = field(default_factory=dict)
    gone: frozenset[str] = frozenset()
    failed: int = 0  # partitions whose read failed this cycle (their readings are absent)


def enumerate_partitions(device: Device, known: frozenset[str]) -> Enumerated:
    """The device's partitions now, probing each one not in ``known`` (on the worker)."""
    if not isinstance(device, Partitioned):
        return Enumerated((), {})
    found: list[Device] = []
    probed: dict[str, frozenset[str]] = {}
    for partition in device.partitions():
        uuid = partition.identity.uuid
        if uuid not in known:
            try:
                probed[uuid] = partition.probe()
            except PartitionGone:
                continue  # destroyed between enumeration and probe: the next scan settles it
        found.append(partition)
    return Enumerated(tuple(found), probed)


_NO_PARTITIONS: Mapping[str, Any] = MappingProxyType({})  # read only: shared by every own read
_NONE_GONE: frozenset[str] = frozenset()


def read_own(read: Callable[[], T] | None) -> TreeRead[T]:
    """The job of a device without partitions between scans (every NVIDIA GPU without MIG):
    ``read_tree`` with no partitions and no enumeration, the device's own read alone (None:
    it does not read this group). The same result, without ``read_tree``'s keyword call,
    dicts and sets per read, and one call less (``read`` takes no device)."""
    return TreeRead(None if read is None else read(), None, _NO_PARTITIONS, _NONE_GONE, 0)


def read_tree(
    parent: Device,
    read: Callable[[Device], T],
    *,
    parent_reads: bool,
    partitions: Mapping[str, Device],
    enumerate_known: frozenset[str] | None,
    serves: Callable[[str, frozenset[str]], bool],
) -> TreeRead[T]:
    """The job: parent, enumeration if asked (``enumerate_known`` not None), partitions.

    ``serves(uuid, probed)`` says whether a partition reads this group. DeviceLost from any
    read propagates: a lost GPU takes its partitions with it.
    """
    own = read(parent) if parent_reads else None
    enumerated = None
    targets = dict(partitions)
    probed: Mapping[str, frozenset[str]] = {}
    if enumerate_known is not None:
        enumerated = enumerate_partitions(parent, enumerate_known)
        targets = {d.identity.uuid: d for d in enumerated.devices}
        probed = enumerated.probed
    out: dict[str, T] = {}
    gone: set[str] = set()
    failed = 0
    for uuid, device in targets.items():
        if not serves(uuid, probed.get(uuid, frozenset())):
            continue
        try:
            out[uuid] = read(device)
        except PartitionGone:
            gone.add(uuid)
        except DeviceLost:
            raise
        except Exception as error:  # one partition's failure is its own
            failed += 1
            log.debug("partition %s: read failed: %s", uuid, error)
    return TreeRead(own, enumerated, out, frozenset(gone), failed)
