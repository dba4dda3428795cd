"""Which amdsmi processors are one physical GPU, and what each is called.

A partitioned MI300X (compute partition DPX/QPX/CPX) is one socket serving one processor per
compute partition (XCP). amdsmi groups processors into sockets by the domain:bus:device of
their BDF (``AMDSmiSystem::get_gpu_socket_id``, amd_smi_system.cc at ROCm/amdsmi 0ceca28); a
partition's BDF carries its XCP index in the function bits (amd_smi_drm.cc; rocm_smi's
``rsmi_dev_partition_id_get`` fallback for non-SPX modes).

Names must never rest on the UUID alone: up to ROCm 7.11 amdsmi builds the UUID from the
socket's serial and PCI device id with a constant function byte (``amdsmi_uuid_gen(...,
0xff)``, amd_smi.cc at 0ceca28), so all eight CPX partitions report the same one; ROCm 7.12
adds the partition id (ROCm/rocm-systems PR 3977). So:

- the parent (the socket) is named by the UUID amdsmi gives the whole part, computed the way
  amdsmi computes it (:func:`socket_uuid`): equal to what every partition reports on the
  libraries that share it, and unchanged when a newer library starts to tell them apart;
- a partition is named by the parent's name and its partition id (``<socket uuid>/xcp<N>``)
  on every library, so its series carry on across the upgrade to ROCm 7.12 (its own UUID
  stays an allocation name for device plugins);
- an unpartitioned MI300X (SPX) is named by the socket UUID as well: ROCm 7.12 gives it a UUID
  with partition id 0 in it, which would otherwise start new series on upgrade.

What users see: ``hw.id`` is the UUID ``amd-smi static`` prints up to ROCm 7.11; from ROCm 7.12
``amd-smi`` prints other UUIDs (function byte = the partition id) while ``hw.id`` stays.
"""

from __future__ import annotations

import contextlib
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpu_otel_agent.plugins.amd import sentinels

log = logging.getLogger(__name__)

SPX = "SPX"  # one partition: the whole GPU


@dataclass(frozen=True)
class Processor:
    """One amdsmi processor handle as enumerated."""

    handle: Any
    uuid: str
    bdf: str  # "0000:0c:00.3"
    model: str
    serial: int | None  # the ASIC serial (hex in amdsmi), None where not reported
    device_id: int | None
    compute_mode: str | None  # "CPX"...; None: the part has no partition files (MI200)
    memory_mode: str | None  # "NPS4"...
    partition_id: int | None

    @property
    def socket(self) -> str:
        """amdsmi's socket id: the BDF without its function."""
        return self.bdf.rsplit(".", 1)[0].upper()

    @property
    def partitioned(self) -> bool:
        return self.compute_mode is not None and self.compute_mode != SPX


def socket_uuid(serial: int, device_id: int) -> str:
    """The UUID amdsmi gives a part: ``amdsmi_uuid_gen(str, serial, did, 0xff)`` (a version-1
    layout whose time_low holds the device id, the function byte and the serial's top byte, and
    whose node holds the serial's low 48 bits; amd_smi_uuid.cc at ROCm/amdsmi 0ceca28)."""
    time_low = (device_id & 0xFFFF) | (0xFF << 16) | (((serial >> 56) & 0xFF) << 24)
    return (f"{time_low:08x}-0000-1000-80{(serial >> 48) & 0xFF:02x}-"
            f"{(serial >> 32) & 0xFFFF:04x}{serial & 0xFFFFFFFF:08x}")


def _text(smi: Any, call: Any, handle: Any) -> str | None:
    """A partition-mode string; None where the part has none (NOT_SUPPORTED and the like)."""
    try:
        value = str(call(handle)).strip()
    except smi.AmdSmiException:
        return None
    return value or None


def _int(value: Any, base: int = 10) -> int | None:
    try:
        return int(str(value), base)
    except ValueError:
        return None


def describe(smi: Any, handle: Any) -> Processor:
    """What names a processor. Raises the library's exception when it has no UUID or BDF."""
    uuid = str(smi.amdsmi_get_gpu_device_uuid(handle))
    bdf = str(smi.amdsmi_get_gpu_device_bdf(handle))
    asic = smi.amdsmi_get_gpu_asic_info(handle)
    serial = _int(asic.get("asic_serial"), 16)
    device_id = _int(asic.get("device_id"), 0) if isinstance(asic.get("device_id"), str) else (
        sentinels.value(asic.get("device_id"), 64))
    partition: float | None = None
    with contextlib.suppress(smi.AmdSmiException):  # an older library: from the BDF instead
        partition = sentinels.value(
            smi.amdsmi_get_gpu_kfd_info(handle).get("current_partition_id"), 32)
    return Processor(
        handle=handle, uuid=uuid, bdf=bdf, model=str(asic["market_name"]),
        serial=serial or None, device_id=int(device_id) if device_id is not None else None,
        compute_mode=_text(smi, smi.amdsmi_get_gpu_compute_partition, handle),
        memory_mode=_text(smi, smi.amdsmi_get_gpu_memory_partition, handle),
        partition_id=int(partition) if partition is not None else None,
    )


@dataclass(frozen=True)
class Socket:
    """One physical GPU: a single processor, or the partitions of a partitioned one."""

    processors: tuple[Processor, ...]  # by partition id; the primary (XCP 0) first

    @property
    def partitioned(self) -> bool:
        return len(self.processors) > 1 or self.processors[0].partitioned

    @property
    def primary(self) -> Processor:
        """XCP 0: it answers for the whole device (socket power, energy, temperatures)."""
        return self.processors[0]


def partition_id(processor: Processor, position: int) -> int:
    """The XCP index: amdsmi's, else the BDF function bits, else the position on the socket."""
    if processor.partition_id is not None:
        return processor.partition_id
    function = _int(processor.bdf.rsplit(".", 1)[-1], 16)
    return function if function is not None else position


def sockets(processors: Sequence[Processor]) -> tuple[Socket, ...]:
    """The processors grouped by socket, sockets in enumeration order."""
    grouped: dict[str, list[Processor]] = {}
    for processor in processors:
        grouped.setdefault(processor.socket, []).append(processor)
    out = []
    for group in grouped.values():
        ordered = sorted(enumerate(group), key=lambda item: partition_id(item[1], item[0]))
        out.append(Socket(tuple(p for _, p in ordered)))
    return tuple(out)


def parent_id(socket: Socket) -> str:
    """The physical GPU's ``hw.id`` (see the module docstring)."""
    primary = socket.primary
    if primary.serial is not None and primary.device_id is not None:
        return socket_uuid(primary.serial, primary.device_id)
    uuids = {p.uuid for p in socket.processors}
    if len(uuids) == 1:
        return primary.uuid  # what all of them report: the whole part's
    return f"{primary.uuid}/socket"


def stable_id(processor: Processor) -> str:
    """The ``hw.id`` of an unpartitioned processor: the socket UUID where the part can be
    partitioned (the same before and after ROCm 7.12), else its UUID."""
    if (processor.compute_mode is None or processor.serial is None
            or processor.device_id is None):
        return processor.uuid
    socket = socket_uuid(processor.serial, processor.device_id)
    # amdsmi's UUID with another function byte (time_low's second byte): ROCm 7.12's
    same_part = processor.uuid.lower()[:2] + processor.uuid.lower()[4:] == socket[:2] + socket[4:]
    return socket if same_part else processor.uuid


def partition_ids(processors: Sequence[Processor], socket: Socket, parent: str) -> list[str]:
    """Each partition's ``hw.id``: ``<parent>/xcp<N>`` where the parent is the socket UUID;
    without a serial to compute it, the partition's UUID where that is unique on the node and
    not the parent's, else ``<uuid>/xcp<N>``."""
    primary = socket.primary
    if primary.serial is not None and primary.device_id is not None:
        return [f"{parent}/xcp{partition_id(p, i)}" for i, p in enumerate(socket.processors)]
    seen = Counter(p.uuid for p in processors)
    ids = []
    for position, processor in enumerate(socket.processors):
        if seen[processor.uuid] == 1 and processor.uuid != parent:
            ids.append(processor.uuid)
        else:
            ids.append(f"{processor.uuid}/xcp{partition_id(processor, position)}")
    return ids
