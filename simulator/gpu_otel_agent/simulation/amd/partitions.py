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

What a partition's handle answers also depends on the ROCm release the node runs
(``amd_rocm_version`` at the top of a scenario, :class:`Library`): see there.
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
# The 8-XCD parts: MI325X and MI355X take the MI300X's compute modes (AMD's partition docs list
# SPX/DPX/QPX/CPX for the MI300 series; the MI355X's QPX and NPS2 are not modelled).
PARTITIONABLE = frozenset({"AMD Instinct MI300X", "AMD Instinct MI325X", "AMD Instinct MI355X"})


def family(model: str, names: frozenset[str] | tuple[str, ...]) -> str | None:
    """The name of ``names`` that ``model`` is a variant of: itself, or a name followed by a
    space or a dash (real MI300X boards print "AMD Instinct MI300X OAM" or "... MI300X-O"
    where the simulator's tables say "AMD Instinct MI300X")."""
    if model in names:
        return model
    return next((n for n in names if model.startswith((n + " ", n + "-"))), None)


def partitionable(model: str) -> bool:
    return family(model, PARTITIONABLE) is not None
_KEYS = ("compute", "memory", "uuid", "missing")
# What one partition of a scenario's ``partitions:`` list may set: its own activity (the per-XCP
# busy of gpu_metrics v1.6) and its VRAM use (a part of the device's, which is their sum).
PARTITION_READINGS = ("utilization_gpu", "memory_used_mib")
DEFAULT_ROCM = "7.0"


@dataclass(frozen=True)
class Library:
    """The amdsmi/amdgpu behaviour of one ROCm release on a partitioned GPU.

    - ``lib_version``: what ``amdsmi_get_lib_version`` answers: 25.4.0 on ROCm 6.4.1
      (``amd-smi version`` in ROCm/ROCm issue 4759), 26.0.0 on ROCm 7.0.1 (ROCm/k8s-gpu-dra-driver
      issue 20); later 7.x releases are modelled as 26.x (not seen in a capture);
    - ``vram_split``: a secondary partition's VRAM total is its even share from ROCm 7.0, XCP 0
      still shows the whole device (ROCm 7.0.1: 98296 MB on a DPX MI300X's second partition,
      196592 MB on its first, k8s-gpu-dra-driver issue 20; rocm-systems PR 8419: sysfs "splits
      whole-die memory evenly"); before, every partition shows the whole device (ROCm 6.4:
      "always show the full GPU memory for each partition", ROCm/ROCm issue 4750);
    - ``modes_everywhere``: partitions other than XCP 0 answer the partition-mode queries (N/A
      on ROCm 6.4.1 and 7.0.1 in the captures above; modelled from ROCm 7.12, with the UUID
      change -- an assumption, no capture shows the change);
    - ``uuid_per_partition``: ROCm 7.12 (rocm-systems PR 3977);
    - ``cu_occupancy_percent``: see there.
    """

    rocm: tuple[int, int]

    @property
    def lib_version(self) -> tuple[int, int, int]:
        major, minor = self.rocm
        if major >= 7:
            return (26, minor, 0)
        return (25, 4, 0) if (major, minor) >= (6, 4) else (24, 7, 1)

    @property
    def vram_split(self) -> bool:
        return self.rocm >= (7, 0)

    @property
    def partition_memory_usage(self) -> bool:
        """``amdsmi_get_gpu_memory_usage`` answers a partition's own VRAM use: amd-smi 26.0.0
        on ROCm 7.0.1 prints 283 MB and 492 MB on the two partitions of one DPX MI300X
        (ROCm/k8s-gpu-dra-driver issue 20); before 7.0 modelled as the device's."""
        return self.rocm >= (7, 0)

    @property
    def modes_everywhere(self) -> bool:
        return self.rocm >= (7, 12)

    @property
    def uuid_per_partition(self) -> bool:
        return self.rocm >= (7, 12)

    @property
    def cu_occupancy_percent(self) -> bool:
        """``cu_occupancy`` of the process list: KFD's CU count x 100 / the node's CUs
        ("Adjust CU occupancy to percent", rocm_smi_kfd.cc at ROCm/amdsmi 0ceca28 and in
        rocm-smi-lib at rocm-systems 1b1610f) before the rework that shipped with ROCm 7.12
        (rocm-systems PR 3589), which reports KFD's count as it is (rocm_smi_kfd.cc at
        rocm-systems 0c348d2)."""
        return self.rocm < (7, 12)


def parse_rocm(raw: object) -> Library:
    """``amd_rocm_version: "7.0"``; ValueError says what is wrong."""
    text = str(raw)
    parts = text.split(".")
    if len(parts) < 2 or not all(p.isdigit() for p in parts[:2]):
        raise ValueError(f"expected a ROCm release like '6.4' or '7.12', got {text!r}")
    return Library((int(parts[0]), int(parts[1])))


DEFAULT_LIBRARY = parse_rocm(DEFAULT_ROCM)


def parse_partition_readings(raw: object, count: int) -> tuple[dict[str, float | None], ...]:
    """``partitions:`` of a device entry: one mapping per partition, in order."""
    if not isinstance(raw, list):
        raise ValueError("expected a list with one mapping per partition")
    if len(raw) > count:
        raise ValueError(f"{len(raw)} entries for {count} partition(s)")
    out = []
    for i, entry in enumerate(raw):
        if not isinstance(entry, dict):
            raise ValueError(f"[{i}]: expected a mapping like {{utilization_gpu: 90}}")
        unknown = sorted(set(map(str, entry)) - set(PARTITION_READINGS))
        if unknown:
            raise ValueError(f"[{i}]: unknown key(s) {', '.join(unknown)}; allowed: "
                             f"{', '.join(PARTITION_READINGS)}")
        values: dict[str, float | None] = {}
        for key, value in entry.items():
            if value is not None and (isinstance(value, bool)
                                      or not isinstance(value, int | float)):
                raise ValueError(f"[{i}].{key}: expected a number or null, got {value!r}")
            values[str(key)] = None if value is None else float(value)
        out.append(values)
    return tuple(out)


@dataclass(frozen=True)
class PartitionSpec:
    compute: str = "SPX"
    memory: str = "NPS1"
    uuid: str = "library"  # shared | per_partition | library: as the node's ROCm release does
    # Partitions the node does not serve: two real 8x MI300X CPX nodes list 63 partitions, not
    # 64 (issue 38). The mode's count stays what it is (a partition's VRAM and CUs are its
    # share of the mode's count, as KFD's are).
    missing: tuple[int, ...] = ()

    @property
    def count(self) -> int:
        """The partitions the mode makes (served or not)."""
        return COMPUTE_PARTITIONS[self.compute]

    @property
    def served(self) -> tuple[int, ...]:
        """The partition ids the node serves, in order (XCP 0 always)."""
        return tuple(p for p in range(self.count) if p not in self.missing)

    def uuid_per_partition(self, library: Library) -> bool:
        if self.uuid == "library":
            return library.uuid_per_partition
        return self.uuid == "per_partition"


def parse(raw: object, model: str) -> PartitionSpec:
    """``partition:`` of a device entry; ValueError says what is wrong."""
    if not partitionable(model):
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
    uuid = str(raw.get("uuid", "library"))
    if compute not in COMPUTE_PARTITIONS:
        modes = ", ".join(COMPUTE_PARTITIONS)
        raise ValueError(f"compute: expected one of {modes}, got {compute!r}")
    if memory not in MEMORY_PARTITIONS:
        raise ValueError(f"memory: expected one of {', '.join(MEMORY_PARTITIONS)}, got {memory!r}")
    if MEMORY_PARTITIONS[memory] > 1 and compute != "CPX":
        raise ValueError(f"memory: {memory} needs compute: CPX on the MI300X (got {compute})")
    if uuid not in (*UUID_MODES, "library"):
        raise ValueError(f"uuid: expected one of {', '.join(UUID_MODES)}, got {uuid!r}")
    missing = _missing(raw.get("missing", []), COMPUTE_PARTITIONS[compute])
    return PartitionSpec(compute, memory, uuid, missing)


def _missing(raw: object, count: int) -> tuple[int, ...]:
    """``missing: [5]``: partition ids 1..count-1 (XCP 0 answers for the socket)."""
    if not isinstance(raw, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) for p in raw):
        raise ValueError("missing: expected a list of partition ids, like [5]")
    bad = [p for p in raw if not 0 < p < count]
    if bad:
        raise ValueError(f"missing: partition ids are 1..{count - 1} (XCP 0 is always "
                         f"served), got {bad}")
    return tuple(sorted(set(raw)))


def partition_readings(base: Mapping[str, V], spec: PartitionSpec) -> dict[str, float]:
    """The per-partition share of what the whole part has (VRAM, CUs)."""
    out: dict[str, float] = {}
    for key in ("memory_total_mib", "compute_units"):
        value = base.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            out[key] = float(value // spec.count) if key == "compute_units" else value / spec.count
    return out
