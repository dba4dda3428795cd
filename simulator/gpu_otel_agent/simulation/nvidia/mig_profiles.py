"""MIG GPU instance profiles per GPU model, as data.

Source: NVIDIA Multi-Instance GPU User Guide, "Supported MIG Profiles"
(https://docs.nvidia.com/datacenter/tesla/mig-user-guide/supported-mig-profiles.html): the
profile names, the fraction of SMs (compute slices of 7) and of memory (memory slices of 8),
and the number of instances of each profile a GPU can hold, for A100-SXM4-40GB,
A100-SXM4-80GB, H100 80GB (SXM5 and PCIe) and H200 (141 GB).

An instance's memory is what real GPUs report, below its fraction of the frame buffer (the
driver reserves some): ``REPORTED_GIB`` holds the figures ``nvidia-smi mig -lgip`` printed on
real machines (its "Memory GiB" column; NVML's nvmlDeviceGetMemoryInfo on a MIG device reports
the same amount in MiB: nvitop#8's A100-SXM4-80GB shows 2g.20gb MIG devices of 19968 MiB =
19.50 GiB). The figure depends on the memory slices only (3g.71gb and 4g.71gb both print
69.50). A model or slice count no capture shows is derived from the captured ones (see
:func:`memory_mib`). Its SM count is ``slices`` times the SMs of one compute slice of the model
(A100: 14, H100/H200: 16) only for compute instances smaller than their GPU instance; a GPU
instance's own count is the profile's (``MigProfile.sms``: an H100 3g.40gb has 60, not 48).

A GPU instance holds one or several compute instances (``nvidia-smi mig -cci``); one spanning
it is named like it ("3g.40gb"), a smaller one "<n>c.<GPU instance profile>" ("1c.3g.40gb",
NVML's MIG device name "... MIG 1c.3g.40gb"); they share the GPU instance's memory.

Placement is checked by totals (compute slices <= 7, memory slices <= 8, instances per
profile), not by the guide's slot-by-slot placement table.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

# nvml.h NVML_GPU_INSTANCE_PROFILE_* ids
_1_SLICE, _2_SLICE, _3_SLICE, _4_SLICE, _7_SLICE = 0x0, 0x1, 0x2, 0x3, 0x4
_1_SLICE_REV1, _1_SLICE_REV2 = 0x7, 0x9  # +me (media extensions); 1 slice with 2/8 memory
# GB20x (RTX PRO) profiles: graphics capable, without media engines, with all of them.
_1_SLICE_GFX, _2_SLICE_GFX, _4_SLICE_GFX = 0x0A, 0x0B, 0x0C
_1_SLICE_NO_ME, _2_SLICE_NO_ME, _1_SLICE_ALL_ME, _2_SLICE_ALL_ME = 0x0D, 0x0E, 0x0F, 0x10

COMPUTE_SLICES = 7
MEMORY_SLICES = 8


@dataclass(frozen=True)
class MigProfile:
    name: str  # NVML's profile name, "3g.40gb"
    slices: int  # compute slices (of 7)
    memory_slices: int  # memory slices (of 8)
    profile_id: int  # NVML_GPU_INSTANCE_PROFILE_*
    max_instances: int  # how many a GPU can hold
    sms: int = 0  # its SM count as nvidia-smi mig -lgip prints it (not slices x a constant)


@dataclass(frozen=True)
class MigModel:
    sms_per_slice: int
    profiles: Mapping[str, MigProfile]


def _model(sms_per_slice: int, gb: tuple[str, str, str, str],
           sms: tuple[int, int, int, int, int, int, int] | None = None) -> MigModel:
    """The seven profiles of the guide's tables; ``gb`` names the memory of 1/8, 2/8, 4/8, 8/8;
    ``sms`` each profile's SM count, in the rows' order, where a real ``-lgip`` printed them
    (else 0: slices x ``sms_per_slice``, see :func:`sm_count`)."""
    eighth, quarter, half, full = gb
    sms = sms or (0, 0, 0, 0, 0, 0, 0)
    rows = (
        MigProfile(f"1g.{eighth}", 1, 1, _1_SLICE, 7, sms[0]),
        MigProfile(f"1g.{eighth}+me", 1, 1, _1_SLICE_REV1, 1, sms[1]),
        MigProfile(f"1g.{quarter}", 1, 2, _1_SLICE_REV2, 4, sms[2]),
        MigProfile(f"2g.{quarter}", 2, 2, _2_SLICE, 3, sms[3]),
        MigProfile(f"3g.{half}", 3, 4, _3_SLICE, 2, sms[4]),
        MigProfile(f"4g.{half}", 4, 4, _4_SLICE, 1, sms[5]),
        MigProfile(f"7g.{full}", 7, 8, _7_SLICE, 1, sms[6]),
    )
    return MigModel(sms_per_slice, MappingProxyType({p.name: p for p in rows}))


# SMs per profile. Hopper is not "slices x 16": the H200's `nvidia-smi mig -lgip`
# (examples/captures/nvidia/h200-mig-lgip.txt, NVIDIA/mig-parted#120) prints 1g 16, 1g.35gb 26,
# 3g 60, 4g 64, 7g 132; the H100 80GB takes the same (132 SMs whole; 2g as 2 x 16 and the
# quarter-memory 1g as on the H200 rest on that capture alone). A100 (108 SMs, 98 usable under
# MIG): 14 per compute slice, as nvitop#8's 2g.20gb MIG devices of 28 SMs show.
_HOPPER_SMS = (16, 16, 26, 32, 60, 64, 132)
_A100_SMS = (14, 14, 14, 28, 42, 56, 98)
_A100_40 = _model(14, ("5gb", "10gb", "20gb", "40gb"), _A100_SMS)
_A100_80 = _model(14, ("10gb", "20gb", "40gb", "80gb"), _A100_SMS)
_H100_80 = _model(16, ("10gb", "20gb", "40gb", "80gb"), _HOPPER_SMS)
_H200 = _model(16, ("18gb", "35gb", "71gb", "141gb"), _HOPPER_SMS)
# Added for issue 37. Names: NVIDIA's MIG user guide (B200) and nvidia-smi mig -lgip captures
# (GB200: NVIDIA/gpu-operator#1303; GB300: an NVIDIA DGX Station walk-through), the rest from
# NVIDIA/mig-parted config-default.yaml (commit bd7160f), whose device filters tie names to PCI
# device ids (0x2901 B200, 0x3182 B300, 0x2342 GH200, 0x2329 H20). SMs per compute slice: 18 on
# B200 and GB200 (-lgip), 16 on GH200 (a GH200 144G -lgip, examples/captures/nvidia), 8 on H20
# (an H20-3e instance of 4 slices printed 32 SMs); B300/GB300 take B200's 18 (reading).
_B200 = _model(18, ("23gb", "45gb", "90gb", "180gb"))
_GB200 = _model(18, ("24gb", "47gb", "93gb", "189gb"))
_B300 = _model(18, ("34gb", "67gb", "135gb", "269gb"))
_GB300 = _model(18, ("35gb", "70gb", "139gb", "278gb"))
_HOPPER_96 = _model(16, ("12gb", "24gb", "48gb", "96gb"))
_H20 = _model(8, ("12gb", "24gb", "48gb", "96gb"))


def _quarters(sms_per_slice: int, gb: tuple[str, str, str]) -> MigModel:
    """A GPU of four compute and four memory slices (NVIDIA's MIG user guide, "RTX PRO 6000
    Blackwell MIG Profiles": 1g = 1/4, 2g = 1/2, 4g = the whole GPU), in this module's eighths:
    a quarter of the memory is two memory slices, so the totals check and the GPU instance ids
    (quarters 3-6, halves 1-2, whole 0; the A30 capture in examples/captures/nvidia prints ids
    from 3 for its quarter-GPU instances) hold as they are. ``gb`` names 1/4, 1/2, 4/4."""
    quarter, half, full = gb
    rows = (
        MigProfile(f"1g.{quarter}", 1, 2, _1_SLICE, 4),
        MigProfile(f"1g.{quarter}+me", 1, 2, _1_SLICE_REV1, 1),
        MigProfile(f"1g.{quarter}+gfx", 1, 2, _1_SLICE_GFX, 4),
        MigProfile(f"1g.{quarter}+me.all", 1, 2, _1_SLICE_ALL_ME, 1),
        MigProfile(f"1g.{quarter}-me", 1, 2, _1_SLICE_NO_ME, 4),
        MigProfile(f"2g.{half}", 2, 4, _2_SLICE, 2),
        MigProfile(f"2g.{half}+gfx", 2, 4, _2_SLICE_GFX, 2),
        MigProfile(f"2g.{half}+me.all", 2, 4, _2_SLICE_ALL_ME, 1),
        MigProfile(f"2g.{half}-me", 2, 4, _2_SLICE_NO_ME, 2),
        MigProfile(f"4g.{full}", 4, 8, _4_SLICE, 1),
        MigProfile(f"4g.{full}+gfx", 4, 8, _4_SLICE_GFX, 1),
    )
    return MigModel(sms_per_slice, MappingProxyType({p.name: p for p in rows}))


# 188 SMs in four compute slices of 47 (reading: no -lgip of the part was found).
_RTX_PRO_6000 = _quarters(47, ("24gb", "48gb", "96gb"))

MODELS: Mapping[str, MigModel] = MappingProxyType({
    "NVIDIA A100-SXM4-40GB": _A100_40,
    "NVIDIA A100-SXM4-80GB": _A100_80,
    "NVIDIA H100 80GB HBM3": _H100_80,
    "NVIDIA H100 PCIe": _H100_80,
    "NVIDIA H200": _H200,
    "NVIDIA B200": _B200,
    "NVIDIA GB200": _GB200,
    "NVIDIA B300 SXM6 AC": _B300,
    "NVIDIA GB300": _GB300,
    "NVIDIA GH200 480GB": _HOPPER_96,
    "NVIDIA H20": _H20,
    "NVIDIA RTX PRO 6000 Blackwell Server Edition": _RTX_PRO_6000,
    "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition": _RTX_PRO_6000,
})


class MigConfigError(ValueError):
    """A MIG configuration the model cannot hold; the message says why."""


def mig_model(model: str) -> MigModel:
    found = MODELS.get(model)
    if found is None:
        raise MigConfigError(f"{model!r} does not support MIG in the simulator "
                             f"(MIG models: {', '.join(MODELS)})")
    return found


def check(model: str, names: Sequence[str]) -> tuple[MigProfile, ...]:
    """The profiles of ``names`` on ``model``, if the GPU can hold them all at once."""
    table = mig_model(model)
    profiles = []
    for name in names:
        profile = table.profiles.get(name)
        if profile is None:
            raise MigConfigError(f"unknown MIG profile {name!r} for {model} "
                                 f"(profiles: {', '.join(table.profiles)})")
        profiles.append(profile)
    _check_totals(model, profiles)
    return tuple(profiles)


def _check_totals(model: str, profiles: Iterable[MigProfile]) -> None:
    chosen = list(profiles)
    slices = sum(p.slices for p in chosen)
    memory = sum(p.memory_slices for p in chosen)
    if slices > COMPUTE_SLICES:
        raise MigConfigError(f"{model}: the profiles need {slices} compute slices, "
                             f"the GPU has {COMPUTE_SLICES}")
    if memory > MEMORY_SLICES:
        raise MigConfigError(f"{model}: the profiles need {memory} memory slices, "
                             f"the GPU has {MEMORY_SLICES}")
    for name, count in Counter(p.name for p in chosen).items():
        limit = next(p.max_instances for p in chosen if p.name == name)
        if count > limit:
            raise MigConfigError(f"{model}: at most {limit} instance(s) of {name}, got {count}")


# GiB per memory-slice count as real GPUs report it (nvidia-smi mig -lgip, "Memory GiB"):
#  - A100-SXM4-80GB: https://github.com/NVIDIA/mig-parted/issues/97 (1g.10gb 9.50, 1g.10gb+me
#    9.50, 2g.20gb 19.50, 3g.40gb 39.25); https://github.com/XuehaiPan/nvitop/pull/8 (nvidia-smi
#    MIG devices table, 2g.20gb: 19968MiB).
#  - A100-SXM4-40GB: https://github.com/seansiddens/mps-test (README, driver 450.80.02): two
#    3g.20gb MIG devices of 20224 and 20096 MiB (the same profile, two totals); 20096 = 19.625.
#  - H100 PCIe: a public README of a Scaleway H100 PCIe (driver 570.169, 2025-08-17; the search
#    index does not name its repository: "Partition a H100 from Scaleway using MIG") prints
#    -lgip 1g.10gb 9.75, 1g.20gb and 2g.20gb 19.62, 3g.40gb and 4g.40gb 39.50, 7g.80gb 79.25 and
#    1g.10gb MIG devices of 9984 MiB (9.75 GiB); another of an H100 with 132 SMs (the SXM part)
#    prints the same figures, so both H100 80GB models take them.
#  - H200: https://github.com/NVIDIA/mig-parted/issues/120 (1g.18gb 16.00, 1g.35gb and 2g.35gb
#    32.25, 3g.71gb and 4g.71gb 69.50, 7g.141gb 139.75).
_H100_80_GIB = MappingProxyType({1: 9.75, 2: 19.625, 4: 39.50, 8: 79.25})
REPORTED_GIB: Mapping[str, Mapping[int, float]] = MappingProxyType({
    "NVIDIA A100-SXM4-80GB": MappingProxyType({1: 9.50, 2: 19.50, 4: 39.25}),
    "NVIDIA A100-SXM4-40GB": MappingProxyType({4: 19.625}),
    "NVIDIA H100 80GB HBM3": _H100_80_GIB,
    "NVIDIA H100 PCIe": _H100_80_GIB,
    "NVIDIA H200": MappingProxyType({1: 16.00, 2: 32.25, 4: 69.50, 8: 139.75}),
    # https://github.com/NVIDIA/mig-parted/pull/166 (B200 -lgip): 1g.23gb 22.00, 1g.45gb and
    # 2g.45gb 44.25; https://github.com/NVIDIA/gpu-operator/pull/1303 (HGX GB200 -lgip):
    # 1g.47gb and 2g.47gb 45.50. Other sizes of these models are derived.
    "NVIDIA B200": MappingProxyType({1: 22.00, 2: 44.25}),
    "NVIDIA GB200": MappingProxyType({2: 45.50}),
})
# Where no capture shows a model's figure: the captured share of the slices' nominal memory
# (A100-SXM4-80GB of 81920 MiB for 1, 2, 4 slices; H200 of 143771 MiB for 8). Reading-derived.
_REPORTED_SHARE = MappingProxyType({1: 9728 / 10240, 2: 19968 / 20480, 4: 40192 / 40960,
                                    8: 143104 / 143771})


def memory_mib(profile: MigProfile, model_memory_mib: float, model: str = "") -> float:
    """The GPU instance's frame buffer as NVML reports it (MiB)."""
    known = REPORTED_GIB.get(model, {}).get(profile.memory_slices)
    if known is not None:
        return known * 1024
    nominal = model_memory_mib * profile.memory_slices / MEMORY_SLICES
    # -lgip prints quarter GiB: the driver hands out memory in 256 MiB steps.
    return float(int(nominal * _REPORTED_SHARE[profile.memory_slices] / 256) * 256)


# A GPU instance's id comes from the range of its memory size: the whole GPU 0, halves 1-2,
# quarters 3-6, eighths 7-14. Every real A100 capture keeps to it: NVIDIA/DCGM#138 (`nvidia-smi
# mig -lgi`, A100 80GB) lists 1g.10gb at placements 2:1 and 3:1 as 9 and 10, a 2g.20gb at 0:2 as
# 3 and a 3g.40gb at 4:4 as 2 on one GPU, and the same layout as 13, 14, 5 and 1 on the next;
# rapidsai/dask-cuda#583 (A100 40GB) got 9, 7, 8, 11, 12, 13, 14 for seven 1g.5gb in creation
# order. Which id of its range the driver picks is not predictable from these (the placement
# alone does not fix it); the node takes the one at the placement's position in the range
# (first id of its size + start / size), which is what the first GPU of DCGM#138 shows.
_FIRST_ID = MappingProxyType({8: 0, 4: 1, 2: 3, 1: 7})


def placement_id(profile: MigProfile, start: int) -> int:
    """The GPU instance id of ``profile`` placed at memory slice ``start``."""
    return _FIRST_ID[profile.memory_slices] + start // profile.memory_slices


def placement_of(profile: MigProfile, gpu_instance_id: int) -> int | None:
    """The memory placement (first slice) an id means for ``profile``; None if none."""
    size = profile.memory_slices
    offset = gpu_instance_id - _FIRST_ID[size]
    return offset * size if 0 <= offset < MEMORY_SLICES // size else None


def first_placement(profile: MigProfile, used: Iterable[int]) -> int | None:
    """The first free placement of ``profile`` (starts aligned to its size), or None."""
    taken = set(used)
    size = profile.memory_slices
    return next((start for start in range(0, MEMORY_SLICES, size)
                 if not taken & set(range(start, start + size))), None)


# Compute instance sizes (compute slices) NVML has profiles for: NVML_COMPUTE_INSTANCE_PROFILE_*.
COMPUTE_INSTANCE_SLICES = (1, 2, 3, 4, 7)


@dataclass(frozen=True)
class ComputeProfile:
    name: str  # the MIG device's profile name: "3g.40gb" (spanning) or "1c.3g.40gb"
    slices: int  # compute slices


def compute_profile(gpu_instance: MigProfile, name: str | None) -> ComputeProfile:
    """A compute instance of ``gpu_instance``: ``name`` "<n>c.<profile>" or the GPU
    instance's own name (None: spanning it)."""
    if name is None or name == gpu_instance.name:
        return ComputeProfile(gpu_instance.name, gpu_instance.slices)
    count, sep, rest = name.partition("c.")
    if not sep or rest != gpu_instance.name or not count.isdigit():
        raise MigConfigError(f"compute instance profile {name!r}: expected "
                             f"'<n>c.{gpu_instance.name}' or '{gpu_instance.name}'")
    slices = int(count)
    if slices not in COMPUTE_INSTANCE_SLICES or slices > gpu_instance.slices:
        sizes = ", ".join(str(n) for n in COMPUTE_INSTANCE_SLICES if n <= gpu_instance.slices)
        raise MigConfigError(f"compute instance profile {name!r}: a {gpu_instance.name} GPU "
                             f"instance holds compute instances of {sizes} slice(s)")
    return ComputeProfile(name if slices < gpu_instance.slices else gpu_instance.name, slices)


def check_compute(gpu_instance: MigProfile, profiles: Sequence[ComputeProfile]) -> None:
    """The compute instances fit in their GPU instance's compute slices."""
    used = sum(p.slices for p in profiles)
    if used > gpu_instance.slices:
        raise MigConfigError(f"compute instances need {used} compute slices, the "
                             f"{gpu_instance.name} GPU instance has {gpu_instance.slices}")


def sm_count(profile: MigProfile, model: str) -> int:
    return profile.sms or profile.slices * mig_model(model).sms_per_slice
