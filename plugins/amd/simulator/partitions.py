"""AMD Instinct partition modes a scenario may set (``partition: {compute: CPX, memory: NPS4}``).

A partitioned MI300X serves one amdsmi processor per compute partition (XCP), all on one
socket. The numbers are AMD's:

- compute modes: SPX = the 8 XCDs as one GPU, DPX 2 x 4, QPX 4 x 2, CPX 8 x 1
  (``amdsmi_accelerator_partition_profile_t.num_partitions``: "On MI300X, SPX: 1, DPX: 2,
  QPX: 4, CPX: 8", amdsmi CHANGELOG at 0ceca28);
- memory modes: NPS1 (one NUMA domain) or NPS4 (four: pairs of HBM stacks), NPS4 only in CPX
  ("the number of memory partitions must be less than or equal to the number of compute
  partitions ... NPS4 is only enabled when in CPX mode", ROCm/rccl PR 1555, docs);
- each partition's VRAM is its share of the whole (amdgpu's ``amdgpu_amdkfd_xcp_memory_size``
  divides a memory partition among its XCPs; the sysfs total "splits whole-die memory evenly",
  ROCm/rocm-systems PR 8419), its CUs likewise (304 = 8 x 38);
- the UUID: amdsmi up to ROCm 7.11 builds it from the socket's serial and device id only
  (``amdsmi_uuid_gen(..., 0xff)`` in amd_smi.cc at 0ceca28), so all partitions share one
  (``uuid: shared``, the default); ROCm 7.12 adds the partition id (ROCm/rocm-systems PR 3977;
  ``uuid: per_partition``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import TypeVar

V = TypeVar("V")

COMPUTE_PARTITIONS: Mapping[str, int] = MappingProxyType({"SPX": 1, "DPX": 2, "QPX": 4, "CPX": 8})
MEMORY_PARTITIONS: Mapping[str, int] = MappingProxyType({"NPS1": 1, "NPS4": 4})
UUID_MODES = ("shared", "per_partition")
# Parts with partition sysfs files; others answer NOT_SUPPORTED to the partition queries.
PARTITIONABLE = frozenset({"AMD Instinct MI300X"})
_KEYS = ("compute", "memory", "uuid")


@dataclass(frozen=True)
class PartitionSpec:
    compute: str = "SPX"
    memory: str = "NPS1"
    uuid: str = "shared"

    @property
    def count(self) -> int:
        return COMPUTE_PARTITIONS[self.compute]


def parse(raw: object, model: str) -> PartitionSpec:
    """``partition:`` of a device entry; ValueError says what is wrong."""
    if model not in PARTITIONABLE:
        only = ", ".join(sorted(PARTITIONABLE))
        raise ValueError(f"{model!r} cannot be partitioned (only {only})")
    if not isinstance(raw, dict):
        raise ValueError("expected a mapping like {compute: CPX, memory: NPS4}")
    unknown = sorted(set(raw) - set(_KEYS))
    if unknown:
        names = ", ".join(map(str, unknown))
        raise ValueError(f"unknown key(s) {names}; allowed: {', '.join(_KEYS)}")
    compute = str(raw.get("compute", "SPX")).upper()
    memory = str(raw.get("memory", "NPS1")).upper()
    uuid = str(raw.get("uuid", "shared"))
    if compute not in COMPUTE_PARTITIONS:
        modes = ", ".join(COMPUTE_PARTITIONS)
        raise ValueError(f"compute: expected one of {modes}, got {compute!r}")
    if memory not in MEMORY_PARTITIONS:
        raise ValueError(f"memory: expected one of {', '.join(MEMORY_PARTITIONS)}, got {memory!r}")
    if MEMORY_PARTITIONS[memory] > 1 and compute != "CPX":
        raise ValueError(f"memory: {memory} needs compute: CPX on the MI300X (got {compute})")
    if uuid not in UUID_MODES:
        raise ValueError(f"uuid: expected one of {', '.join(UUID_MODES)}, got {uuid!r}")
    return PartitionSpec(compute, memory, uuid)


def partition_readings(base: Mapping[str, V], spec: PartitionSpec) -> dict[str, float]:
    """The per-partition share of what the whole part has (VRAM, CUs)."""
    out: dict[str, float] = {}
    for key in ("memory_total_mib", "compute_units"):
        value = base.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = float(value // spec.count) if key == "compute_units" else value / spec.count
    return out
