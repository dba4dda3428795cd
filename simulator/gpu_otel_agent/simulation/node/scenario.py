"""Scenario files: YAML → validated, frozen dataclasses.

Every error names the file, the key path (``devices[2].utilization_gpu``) and the
line, because scenario files are written by hand and a vague error wastes time.
The set of readings and NVML functions is read from the C source, the one place
that defines them.
"""

from __future__ import annotations

import dataclasses
import re
import uuid as uuidlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

import yaml

from gpu_otel_agent.config.file_text import FileRefused, read_text
from gpu_otel_agent.config.load import yaml_error
from gpu_otel_agent.config.safe_yaml import NoAliasLoader
from gpu_otel_agent.simulation.amd import models as amd_models
from gpu_otel_agent.simulation.amd import partitions as amd_partitions
from gpu_otel_agent.simulation.amd import scenario as amd_scenario
from gpu_otel_agent.simulation.captures.registry import (
    CaptureError,
    CaptureFragment,
    NotServed,
    read_capture,
)
from gpu_otel_agent.simulation.core.tables import macro_names
from gpu_otel_agent.simulation.nvidia import fabric, models
from gpu_otel_agent.simulation.nvidia.build_nvml import SOURCE  # its tables name the readings
from gpu_otel_agent.simulation.nvidia.faults import FaultSpecError, parse_chaos, parse_fail
from gpu_otel_agent.simulation.nvidia.mig_profiles import (
    MigConfigError,
    check,
    check_compute,
    compute_profile,
)
from gpu_otel_agent.simulation.nvidia.nvlinks import LinkError, scenario_readings
from gpu_otel_agent.simulation.operations import BY_TIMELINE_KEY, Device

# Readings a scenario may not set directly: identity comes from the model.
_IDENTITY = frozenset(
    {
        "architecture",
        "cuda_cc_major",
        "cuda_cc_minor",
        "brand",
        "pci_device_id",
        "pci_subsystem_id",
        "gpm_supported",
    }
)


class ScenarioError(ValueError):
    """A scenario file is malformed; the message names file, key path and line."""


def reading_names() -> tuple[str, ...]:
    """All readings the simulated library serves (scenario metric keys)."""
    return macro_names(SOURCE, "SIM_READINGS") + macro_names(SOURCE, "SIM_NVLINK_READINGS")


def function_names() -> tuple[str, ...]:
    """All NVML functions the simulated library exports."""
    return macro_names(SOURCE, "SIM_FUNCS")


def settable_readings() -> frozenset[str]:
    return frozenset(reading_names()) - _IDENTITY


@dataclass(frozen=True)
class Sine:
    min: float
    max: float
    period_s: float
    phase_s: float = 0.0


@dataclass(frozen=True)
class Random:
    min: float
    max: float


Value = float | Sine | Random | None
"""A reading: a number, a pattern, or None (the call serving it is NOT_SUPPORTED)."""


# What one MIG instance of a scenario may set (per-instance readings; patterns allowed).
MIG_READINGS = ("memory_used_mib", "sm_active", "sm_occupancy", "tensor_active", "dram_active",
                "fp16_active", "fp32_active", "fp64_active")


# Readings of one compute instance (its own activity; memory is its GPU instance's).
CI_READINGS = tuple(r for r in MIG_READINGS if r != "memory_used_mib")
MIG_INDEX_LIMIT = 7  # nvmlDeviceGetMaxMigDeviceCount on A100 / H100 / H200


@dataclass(frozen=True)
class ComputeInstanceSpec:
    """One compute instance of a GPU instance: one MIG device (its own handle and UUID)."""

    profile: str | None = None  # "1c.3g.40gb"; None: spanning the GPU instance
    compute_instance_id: int | None = None  # None: its position in the list
    mig_index: int | None = None  # its MIG device index; None: the lowest free one
    uuid: str | None = None  # "MIG-..."; None: generated
    readings: Mapping[str, Value] = field(default_factory=lambda: MappingProxyType({}))


@dataclass(frozen=True)
class MigSpec:
    """One GPU instance of a MIG-enabled GPU and its compute instances."""

    profile: str
    readings: Mapping[str, Value]  # memory_used_mib is the GPU instance's; activity its CIs'
    gpu_instance_id: int | None = None  # None: its first free placement's, as a real GPU's
    compute_instances: tuple[ComputeInstanceSpec, ...] = (ComputeInstanceSpec(),)
    memory_total_mib: float | None = None  # None: what the model's profile reports


@dataclass(frozen=True)
class DeviceSpec:
    index: int
    model: str
    uuid: str | None
    pci_bus_id: str | None
    serial: str | None
    readings: Mapping[str, Value]
    unsupported: tuple[str, ...]
    vendor: str = "nvidia"  # or "amd": served by the simulated libamd_smi.so
    mig: tuple[MigSpec, ...] | None = None  # MIG mode on, these instances (None: off)
    # AMD: compute/memory partition modes (None: the part's default, unpartitioned)
    partition: amd_partitions.PartitionSpec | None = None
    # AMD: each partition's own readings (``partitions:``), in partition order
    partition_readings: tuple[Mapping[str, float | None], ...] = ()
    vbios: str | None = None  # nvmlDeviceGetVbiosVersion (None: the model's)
    board_part: str | None = None  # nvmlDeviceGetBoardPartNumber (None: the model's)


@dataclass(frozen=True)
class ProcessSpec:
    device: int
    pid: int | None  # None: the node spawns a placeholder process
    cgroup: str | None
    used_memory_mib: float
    sm_util: Value
    mem_util: Value
    kind: str  # compute | graphics | mps
    mig: int | None = None  # position in the device's ``mig`` list: runs on that instance
    partition: int | None = None  # AMD: the compute partition (XCP) it runs on
    ci: int | None = None  # position in that GPU instance's compute instances (None: the first)
    pod: tuple[str, str] | None = None  # (namespace, name): served by the node's kubelet


@dataclass(frozen=True)
class TimelineEvent:
    at_s: float
    device: int | None
    action: str  # its operation's name (operations.py: xid, hang, proc_add, ...)
    args: Mapping[str, object]


@dataclass(frozen=True)
class Scenario:
    path: Path
    vendor: str
    driver_version: str
    cuda_driver_version: int
    nvml_version: str
    devices: tuple[DeviceSpec, ...]
    processes: tuple[ProcessSpec, ...]
    missing_symbols: tuple[str, ...]
    timeline: tuple[TimelineEvent, ...]
    amd_driver_version: str = "6.10.5"  # amdgpu, for the AMD devices
    # The ROCm release whose amdsmi the AMD devices answer as (partition behaviour)
    amd_library: amd_partitions.Library = amd_partitions.DEFAULT_LIBRARY
    chaos: Mapping[str, object] | None = None  # a validated `chaos` request (faults.py)
    # Captures of real machines whose GPUs lead ``devices`` (in order), with what each cannot
    # serve as printed.
    captures: tuple[CaptureFragment, ...] = ()


# --------------------------------------------------------------------------- parsing


class _Ctx:
    """Carries the file name and the line of every key path for error messages."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.lines: dict[str, int] = {}

    def fail(self, key: str, msg: str) -> ScenarioError:
        line = self.lines.get(key)
        while line is None and key:
            key = re.sub(r"(\.[^.\[\]]+|\[\d+\])$", "", key) if re.search(r"[.\[]", key) else ""
            line = self.lines.get(key)
        where = f"{self.path}:{line}" if line is not None else str(self.path)
        # The file's top level has no key path; "<top>" read like the command's name.
        return ScenarioError(f"{where}: {key}: {msg}" if key else f"{where}: {msg}")

    def to_python(self, node: yaml.Node, key: str) -> object:
        self.lines.setdefault(key, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            out: dict[str, object] = {}
            for knode, vnode in node.value:
                k = knode.value
                if not isinstance(knode, yaml.ScalarNode) or not isinstance(k, str):
                    raise self.fail(key, "mapping keys must be strings")
                sub = f"{key}.{k}" if key else k
                if k in out:
                    self.lines[sub] = knode.start_mark.line + 1
                    raise self.fail(sub, "duplicate key")
                self.lines[sub] = knode.start_mark.line + 1
                out[k] = self.to_python(vnode, sub)
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self.to_python(v, f"{key}[{i}]") for i, v in enumerate(node.value)]
        return _construct_scalar(node)


def _construct_scalar(node: yaml.Node) -> object:
    """Plain YAML 1.1 scalar (int, float, bool, null, str) with SafeLoader's rules."""
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def _mapping(
    ctx: _Ctx, v: object, key: str, allowed: Sequence[str] | frozenset[str]
) -> dict[str, object]:
    if not isinstance(v, dict):
        raise ctx.fail(key, f"expected a mapping, got {type(v).__name__}")
    for k in v:
        if k not in allowed:
            sub = f"{key}.{k}" if key else k
            raise ctx.fail(sub, f"unknown key {k!r}")
    return v


def _num(ctx: _Ctx, v: object, key: str, *, minimum: float | None = None) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise ctx.fail(key, f"expected a number, got {v!r}")
    if minimum is not None and v < minimum:
        raise ctx.fail(key, f"must be >= {minimum}, got {v!r}")
    return float(v)


def _int(ctx: _Ctx, v: object, key: str, *, minimum: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int):
        raise ctx.fail(key, f"expected an integer, got {v!r}")
    if v < minimum:
        raise ctx.fail(key, f"must be >= {minimum}, got {v}")
    return v


def _str(ctx: _Ctx, v: object, key: str) -> str:
    if not isinstance(v, str) or not v:
        raise ctx.fail(key, f"expected a non-empty string, got {v!r}")
    return v


def parse_value(ctx: _Ctx, v: object, key: str) -> Value:
    """A reading: number, null, {sine: {min, max, period_s[, phase_s]}} or {random: {min, max}}."""
    if v is None:
        return None
    if isinstance(v, bool):
        return 1.0 if v else 0.0
    if isinstance(v, int | float):
        return float(v)
    if isinstance(v, dict):
        if len(v) != 1:
            raise ctx.fail(key, "a pattern has exactly one of 'sine' or 'random'")
        kind, body = next(iter(v.items()))
        sub = f"{key}.{kind}"
        if kind == "sine":
            b = _mapping(ctx, body, sub, ("min", "max", "period_s", "phase_s"))
            for req in ("min", "max", "period_s"):
                if req not in b:
                    raise ctx.fail(sub, f"missing key {req!r}")
            lo, hi = _num(ctx, b["min"], f"{sub}.min"), _num(ctx, b["max"], f"{sub}.max")
            if hi < lo:
                raise ctx.fail(f"{sub}.max", "max must be >= min")
            period = _num(ctx, b["period_s"], f"{sub}.period_s")
            if period <= 0:
                raise ctx.fail(f"{sub}.period_s", "must be > 0")
            phase = _num(ctx, b.get("phase_s", 0.0), f"{sub}.phase_s")
            return Sine(lo, hi, period, phase)
        if kind == "random":
            b = _mapping(ctx, body, sub, ("min", "max"))
            for req in ("min", "max"):
                if req not in b:
                    raise ctx.fail(sub, f"missing key {req!r}")
            lo, hi = _num(ctx, b["min"], f"{sub}.min"), _num(ctx, b["max"], f"{sub}.max")
            if hi < lo:
                raise ctx.fail(f"{sub}.max", "max must be >= min")
            return Random(lo, hi)
        raise ctx.fail(key, f"unknown pattern {kind!r} (expected 'sine' or 'random')")
    raise ctx.fail(key, f"expected a number, null or a pattern, got {v!r}")


_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")


def parse_duration(ctx: _Ctx, v: object, key: str) -> float:
    if isinstance(v, int | float) and not isinstance(v, bool):
        if v < 0:
            raise ctx.fail(key, "must be >= 0")
        return float(v)
    m = _DURATION.match(v) if isinstance(v, str) else None
    if not m:
        raise ctx.fail(key, f"expected a duration like '5s', '500ms' or '2m', got {v!r}")
    scale = {"ms": 0.001, "s": 1.0, None: 1.0, "m": 60.0, "h": 3600.0}[m.group(2)]
    return float(m.group(1)) * scale


def vendor_readings(vendor: str) -> frozenset[str]:
    """The reading keys a device of ``vendor`` may set."""
    return amd_scenario.settable_readings() if vendor == "amd" else settable_readings()


def _readings(
    ctx: _Ctx, raw: Mapping[str, object], key: str, vendor: str = "nvidia"
) -> dict[str, Value]:
    allowed = vendor_readings(vendor)
    out: dict[str, Value] = {}
    for k, v in raw.items():
        if k not in allowed:
            raise ctx.fail(f"{key}.{k}", f"unknown reading {k!r} for vendor {vendor}")
        out[k] = parse_value(ctx, v, f"{key}.{k}")
    return out


_DEVICE_KEYS = ("model", "uuid", "pci_bus_id", "serial", "unsupported", "vendor", "mig",
                "partition", "partitions", "nvlink", "fabric", "vbios", "board_part")
VENDORS = ("nvidia", "amd")
_PCI = re.compile(r"^[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]$")


def _device(ctx: _Ctx, raw: object, i: int) -> DeviceSpec:
    key = f"devices[{i}]"
    vendor = raw.get("vendor", "nvidia") if isinstance(raw, dict) else "nvidia"
    if vendor not in VENDORS:
        raise ctx.fail(f"{key}.vendor", f"expected one of {', '.join(VENDORS)}, got {vendor!r}")
    identity_keys = _IDENTITY if vendor == "nvidia" else frozenset()
    d = _mapping(ctx, raw, key, frozenset(_DEVICE_KEYS) | vendor_readings(vendor) | identity_keys)
    if "model" not in d:
        raise ctx.fail(key, "missing key 'model'")
    model = _str(ctx, d["model"], f"{key}.model")
    uuid = _str(ctx, d["uuid"], f"{key}.uuid") if d.get("uuid") is not None else None
    pci = None
    if d.get("pci_bus_id") is not None:
        pci = _str(ctx, d["pci_bus_id"], f"{key}.pci_bus_id")
        if not _PCI.match(pci):
            raise ctx.fail(f"{key}.pci_bus_id", f"expected 'DDDDDDDD:BB:DD.F', got {pci!r}")
    serial = str(d["serial"]) if d.get("serial") is not None else None
    vbios = _str(ctx, d["vbios"], f"{key}.vbios") if d.get("vbios") is not None else None
    board_part = (_str(ctx, d["board_part"], f"{key}.board_part")
                  if d.get("board_part") is not None else None)
    unsupported: list[str] = []
    raw_uns = d.get("unsupported", [])
    if not isinstance(raw_uns, list):
        raise ctx.fail(f"{key}.unsupported", "expected a list of NVML function names")
    known = set(amd_scenario.function_names() if vendor == "amd" else function_names())
    library = "amdsmi" if vendor == "amd" else "NVML"
    for j, name in enumerate(raw_uns):
        if not isinstance(name, str) or name not in known:
            raise ctx.fail(f"{key}.unsupported[{j}]", f"unknown {library} function {name!r}")
        unsupported.append(name)
    readings = _readings(
        ctx, {k: v for k, v in d.items() if k not in _DEVICE_KEYS and k not in identity_keys},
        key, str(vendor)
    )
    readings.update(_identity(ctx, {k: v for k, v in d.items() if k in identity_keys}, key,
                              model))
    if d.get("nvlink") is not None:
        if vendor != "nvidia":
            raise ctx.fail(f"{key}.nvlink", "NVLink is NVIDIA's (AMD XGMI: not per link)")
        try:
            readings.update(scenario_readings(d["nvlink"]))
        except LinkError as error:
            raise ctx.fail(f"{key}.nvlink", str(error)) from error
    if d.get("fabric") is not None:
        if vendor != "nvidia":
            raise ctx.fail(f"{key}.fabric", "the GPU fabric probe is NVIDIA's (NVML)")
        try:
            readings.update(fabric.readings(d["fabric"]))
        except fabric.FabricError as error:
            raise ctx.fail(f"{key}.fabric", str(error)) from error
    mig = _mig(ctx, d["mig"], f"{key}.mig", model) if d.get("mig") is not None else None
    if mig is not None and vendor != "nvidia":
        raise ctx.fail(f"{key}.mig", "MIG is an NVIDIA feature (AMD: use 'partition')")
    partition = None
    if d.get("partition") is not None:
        if vendor != "amd":
            raise ctx.fail(f"{key}.partition", "partition modes are AMD's (NVIDIA: use 'mig')")
        try:
            partition = amd_partitions.parse(d["partition"], model)
        except ValueError as error:
            raise ctx.fail(f"{key}.partition", str(error)) from error
    per_partition: tuple[Mapping[str, float | None], ...] = ()
    if d.get("partitions") is not None:
        if partition is None:
            raise ctx.fail(f"{key}.partitions", "needs 'partition: {compute: ...}' (AMD)")
        try:
            per_partition = tuple(MappingProxyType(r) for r in
                                  amd_partitions.parse_partition_readings(d["partitions"],
                                                                          partition.count))
        except ValueError as error:
            raise ctx.fail(f"{key}.partitions", str(error)) from error
    return DeviceSpec(
        i, model, uuid, pci, serial, MappingProxyType(readings), tuple(unsupported), str(vendor),
        mig, partition, per_partition, vbios, board_part,
    )


_BRANDS: Mapping[str, int] = MappingProxyType({
    "tesla": models.BRAND_TESLA, "geforce": models.BRAND_GEFORCE,
    "nvidia rtx": models.BRAND_NVIDIA_RTX, "nvidia": models.BRAND_NVIDIA})


def _identity(ctx: _Ctx, raw: Mapping[str, object], key: str, model: str) -> dict[str, Value]:
    """Identity a scenario (or a capture, as printed) gives a device: the architecture as
    nvml.h's number or nvidia-smi's name, PCI ids as numbers or hex ("0x2B8510DE", the XML's
    "2B8510DE"). For a model the table does not know, the compute capability and GPM support
    follow from the architecture unless given."""
    out: dict[str, Value] = {}
    for name, value in raw.items():
        sub = f"{key}.{name}"
        if value is None:
            raise ctx.fail(sub, "an identity value cannot be null (NVML always answers it)")
        if name == "architecture":
            try:
                out[name] = float(models.architecture_number(value))
            except ValueError as error:
                raise ctx.fail(sub, str(error)) from error
        elif name in ("pci_device_id", "pci_subsystem_id"):
            out[name] = float(_hex_id(ctx, value, sub))
        elif name == "brand" and isinstance(value, str):
            if value.strip().lower() not in _BRANDS:
                raise ctx.fail(sub, f"unknown brand {value!r} (one of {', '.join(_BRANDS)}, "
                                    f"or nvml.h's NVML_BRAND_* number)")
            out[name] = float(_BRANDS[value.strip().lower()])
        else:
            out[name] = float(_int(ctx, value, sub, minimum=0))
    arch = out.get("architecture")
    if model not in models.MODELS and isinstance(arch, float):
        for name, number in models.ARCH_DEFAULTS.get(int(arch), {}).items():
            out.setdefault(name, number)
    return out


def _hex_id(ctx: _Ctx, value: object, key: str) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 0xFFFFFFFF:
        return value
    if isinstance(value, str):
        text = value.strip().lower().removeprefix("0x")
        if re.fullmatch(r"[0-9a-f]{1,8}", text):
            return int(text, 16)
    raise ctx.fail(key, f"expected a PCI id as printed ('0x2B8510DE') or a number, got {value!r}")


def _known_model(ctx: _Ctx, key: str, model: str, vendor: str,
                 entry: Mapping[str, object], *, captured: bool = False) -> None:
    """A model the simulator has no data for is refused unless the entry gives what a generic
    default would get wrong: its architecture, PCI device id, memory and power limit. A
    capture's GPU is served as printed: what the capture did not print is NVML's "unknown"
    (architecture, device id), and its memory must be printed."""
    if vendor == "amd" or captured:
        known = ((*amd_models.MODELS, amd_models.UNNAMED_CAPTURED) if vendor == "amd"
                 else tuple(models.MODELS))
        if model in known or "memory_total_mib" in entry:
            return
        if vendor == "amd" and amd_partitions.family(model, tuple(amd_models.MODELS)) is not None:
            return  # a board variant's name ("AMD Instinct MI300X OAM"): its family's data
        raise ctx.fail(key, f"unknown {vendor} model {model!r}; known: {', '.join(known)} "
                            f"(or give memory_total_mib and the limits of a model not listed)")
    if model in models.MODELS:
        return
    missing = [name for name in models.REQUIRED_FOR_UNKNOWN if name not in entry]
    if not missing:
        return
    raise ctx.fail(key, f"unknown nvidia model {model!r}: the simulator has no data for it, so "
                        f"the device must give {', '.join(models.REQUIRED_FOR_UNKNOWN)} "
                        f"(missing: {', '.join(missing)}), for example "
                        f"{{model: {model!r}, architecture: Blackwell, pci_device_id: "
                        f"'0x2B8510DE', memory_total_mib: 32607, power_limit_w: 575}}; "
                        f"optional: cuda_cc_major/cuda_cc_minor, multiprocessor_count, "
                        f"max_sm_clock_mhz, nvlink_links; or name a known model: "
                        f"{', '.join(models.MODELS)}")


def _mig(ctx: _Ctx, raw: object, key: str, model: str) -> tuple[MigSpec, ...]:
    """``mig:`` of a device: its GPU instances, each a profile of the model's table."""
    if not isinstance(raw, list):
        raise ctx.fail(key, "expected a list of GPU instances ({profile: 3g.40gb, ...})")
    out = []
    for j, entry in enumerate(raw):
        out.append(_gpu_instance(ctx, entry, f"{key}[{j}]"))
    try:
        profiles = check(model, [spec.profile for spec in out])
    except MigConfigError as error:
        raise ctx.fail(key, str(error)) from error
    for j, (spec, profile) in enumerate(zip(out, profiles, strict=True)):
        sub = f"{key}[{j}].compute_instances"
        try:
            check_compute(profile, [compute_profile(profile, ci.profile)
                                    for ci in spec.compute_instances])
        except MigConfigError as error:
            raise ctx.fail(sub, str(error)) from error
    _unique(ctx, key, "gpu_instance_id", [s.gpu_instance_id for s in out])
    _unique(ctx, key, "mig_index", [c.mig_index for s in out for c in s.compute_instances])
    return tuple(out)


_GI_KEYS = ("profile", "gpu_instance_id", "compute_instances", "mig_index", "uuid",
            "memory_total_mib", *MIG_READINGS)
_CI_KEYS = ("profile", "compute_instance_id", "mig_index", "uuid", *CI_READINGS)


def _gpu_instance(ctx: _Ctx, entry: object, sub: str) -> MigSpec:
    m = _mapping(ctx, entry, sub, _GI_KEYS)
    if "profile" not in m:
        raise ctx.fail(sub, "missing key 'profile'")
    profile = _str(ctx, m["profile"], f"{sub}.profile")
    readings = {k: parse_value(ctx, v, f"{sub}.{k}") for k, v in m.items() if k in MIG_READINGS}
    gi = _int(ctx, m["gpu_instance_id"], f"{sub}.gpu_instance_id") \
        if m.get("gpu_instance_id") is not None else None
    total = _num(ctx, m["memory_total_mib"], f"{sub}.memory_total_mib", minimum=1) \
        if m.get("memory_total_mib") is not None else None
    raw_cis = m.get("compute_instances")
    if raw_cis is None:  # one compute instance spanning it; its index and UUID may be given here
        cis: tuple[ComputeInstanceSpec, ...] = (_compute_instance(
            ctx, {k: m[k] for k in ("mig_index", "uuid") if k in m}, sub),)
    else:
        for k in ("mig_index", "uuid"):
            if k in m:
                raise ctx.fail(f"{sub}.{k}", f"with 'compute_instances', give '{k}' per "
                               "compute instance")
        if not isinstance(raw_cis, list) or not raw_cis:
            raise ctx.fail(f"{sub}.compute_instances",
                           "expected a non-empty list ({profile: 1c.3g.40gb}, ...)")
        cis = tuple(_compute_instance(ctx, c, f"{sub}.compute_instances[{n}]")
                    for n, c in enumerate(raw_cis))
        ids = [c.compute_instance_id if c.compute_instance_id is not None else n
               for n, c in enumerate(cis)]
        _unique(ctx, f"{sub}.compute_instances", "compute_instance_id", ids)
    return MigSpec(profile, MappingProxyType(readings), gi, cis, total)


def _compute_instance(ctx: _Ctx, entry: object, sub: str) -> ComputeInstanceSpec:
    c = _mapping(ctx, entry, sub, _CI_KEYS)
    ci_id = _int(ctx, c["compute_instance_id"], f"{sub}.compute_instance_id") \
        if c.get("compute_instance_id") is not None else None
    index = None
    if c.get("mig_index") is not None:
        index = _int(ctx, c["mig_index"], f"{sub}.mig_index")
        if index >= MIG_INDEX_LIMIT:
            raise ctx.fail(f"{sub}.mig_index", f"must be < {MIG_INDEX_LIMIT} (the GPU's "
                           "maximum MIG device count)")
    uuid = None
    if c.get("uuid") is not None:
        uuid = _str(ctx, c["uuid"], f"{sub}.uuid")
        if not uuid.startswith("MIG-"):
            raise ctx.fail(f"{sub}.uuid", f"a MIG device UUID starts with 'MIG-', got {uuid!r}")
    profile = _str(ctx, c["profile"], f"{sub}.profile") if c.get("profile") is not None else None
    readings = {k: parse_value(ctx, v, f"{sub}.{k}") for k, v in c.items() if k in CI_READINGS}
    return ComputeInstanceSpec(profile, ci_id, index, uuid, MappingProxyType(readings))


def _unique(ctx: _Ctx, key: str, name: str, values: Sequence[int | None]) -> None:
    seen = [v for v in values if v is not None]
    for v in seen:
        if seen.count(v) > 1:
            raise ctx.fail(key, f"{name} {v} is given twice")


_KINDS = ("compute", "graphics", "mps")


def _process(ctx: _Ctx, raw: object, i: int, devices: Sequence[DeviceSpec]) -> ProcessSpec:
    n_dev = len(devices)
    key = f"processes[{i}]"
    p = _mapping(
        ctx, raw, key,
        ("device", "pid", "spawn", "used_memory_mib", "sm_util", "mem_util", "type", "mig",
         "partition", "ci", "pod"),
    )
    if "device" not in p:
        raise ctx.fail(key, "missing key 'device'")
    dev = _int(ctx, p["device"], f"{key}.device")
    if dev >= n_dev:
        raise ctx.fail(f"{key}.device", f"no device {dev} (the scenario has {n_dev})")
    pid = None
    cgroup = None
    if "pid" in p and "spawn" in p:
        raise ctx.fail(key, "give either 'pid' or 'spawn', not both")
    if "pid" in p:
        pid = _int(ctx, p["pid"], f"{key}.pid", minimum=1)
    if "spawn" in p:
        s = p["spawn"]
        if s is not None:
            sm = _mapping(ctx, s, f"{key}.spawn", ("cgroup",))
            if sm.get("cgroup") is not None:
                cgroup = _str(ctx, sm["cgroup"], f"{key}.spawn.cgroup").strip("/")
    kind = p.get("type", "compute")
    if kind not in _KINDS:
        raise ctx.fail(f"{key}.type", f"expected one of {', '.join(_KINDS)}, got {kind!r}")
    mem = _num(ctx, p.get("used_memory_mib", 0), f"{key}.used_memory_mib", minimum=0)
    mig = None
    if p.get("mig") is not None:
        mig = _mig_position(ctx, p["mig"], f"{key}.mig", devices[dev])
    ci = _ci_position(ctx, p, key, devices[dev], mig)
    partition = None
    if p.get("partition") is not None:
        partition = _int(ctx, p["partition"], f"{key}.partition")
        spec = devices[dev].partition
        count = spec.count if spec is not None else 1
        if partition >= count or (spec is not None and partition not in spec.served):
            raise ctx.fail(f"{key}.partition", f"device {dev} has {count} compute "
                           f"partition(s), no partition {partition} served")
    pod = _pod(ctx, p["pod"], f"{key}.pod") if p.get("pod") is not None else None
    if pod is not None:
        if pid is not None:
            raise ctx.fail(f"{key}.pod", "a pod's process is one the node spawns: drop 'pid'")
        cgroup = cgroup or pod_cgroup(*pod)
    return ProcessSpec(
        dev,
        pid,
        cgroup,
        mem,
        parse_value(ctx, p.get("sm_util", 0), f"{key}.sm_util"),
        parse_value(ctx, p.get("mem_util", 0), f"{key}.mem_util"),
        str(kind),
        mig,
        partition,
        ci,
        pod,
    )


def _ci_position(ctx: _Ctx, entry: Mapping[str, object], key: str, device: DeviceSpec,
                 mig: int | None) -> int | None:
    """``ci``: a position in the compute instances of the GPU instance ``mig`` names."""
    if entry.get("ci") is None:
        return None
    if mig is None:
        raise ctx.fail(f"{key}.ci", "'ci' needs 'mig' (the GPU instance it is in)")
    position = _int(ctx, entry["ci"], f"{key}.ci")
    assert device.mig is not None
    count = len(device.mig[mig].compute_instances)
    if position >= count:
        raise ctx.fail(f"{key}.ci", f"GPU instance {mig} of device {device.index} has {count} "
                       f"compute instance(s)")
    return position


def _pod(ctx: _Ctx, raw: object, key: str) -> tuple[str, str]:
    m = _mapping(ctx, raw, key, ("name", "namespace"))
    if "name" not in m:
        raise ctx.fail(key, "missing key 'name'")
    return _str(ctx, m.get("namespace", "default"), f"{key}.namespace"), \
        _str(ctx, m["name"], f"{key}.name")


def pod_cgroup(namespace: str, name: str) -> str:
    """The cgroup a kubelet (cgroupfs driver) would give the pod's one container, with a UID
    and container id derived from the pod's name: the same on every run."""
    uid = uuidlib.uuid5(uuidlib.NAMESPACE_URL, f"gpu-sim/{namespace}/{name}")
    container = uuidlib.uuid5(uid, "main").hex * 2
    return f"gpu-sim/kubepods/besteffort/pod{uid}/{container}"


def _mig_position(ctx: _Ctx, v: object, key: str, device: DeviceSpec) -> int:
    position = _int(ctx, v, key)
    if device.mig is None:
        raise ctx.fail(key, f"device {device.index} has no 'mig' instances")
    if position >= len(device.mig):
        raise ctx.fail(key, f"device {device.index} has {len(device.mig)} MIG instance(s)")
    return position


# A timeline entry's key is its operation's (``operations.py``); one with no device acts on
# the whole node, or (``proc_rm``, ``fail``) on every device.
_ACTIONS = tuple(BY_TIMELINE_KEY)


@dataclass(frozen=True)
class _Entry:
    """One timeline entry being validated: where it is, what it names, its action's value."""

    ctx: _Ctx
    key: str  # timeline[i]
    raw: Mapping[str, object]
    action: str
    value: object
    device: int | None
    vendor: str
    devices: Sequence[DeviceSpec]

    @property
    def sub(self) -> str:
        return f"{self.key}.{self.action}"

    def fail(self, msg: str, key: str | None = None) -> ScenarioError:
        return self.ctx.fail(key or self.sub, msg)


def _timeline(ctx: _Ctx, raw: object, i: int, devices: Sequence[DeviceSpec]) -> TimelineEvent:
    vendors = [d.vendor for d in devices]
    n_dev = len(vendors)
    key = f"timeline[{i}]"
    e = _mapping(ctx, raw, key, ("at", "device", "mig", "ci", *_ACTIONS))
    if "at" not in e:
        raise ctx.fail(key, "missing key 'at'")
    at = parse_duration(ctx, e["at"], f"{key}.at")
    actions = [a for a in _ACTIONS if a in e]
    if len(actions) != 1:
        raise ctx.fail(key, f"exactly one action of {', '.join(_ACTIONS)} is required")
    operation = BY_TIMELINE_KEY[actions[0]]
    dev: int | None = None
    if "device" in e:
        dev = _int(ctx, e["device"], f"{key}.device")
        if dev >= n_dev:
            raise ctx.fail(f"{key}.device", f"no device {dev} (the scenario has {n_dev})")
    elif operation.device is Device.REQUIRED:
        raise ctx.fail(key, "missing key 'device'")
    entry = _Entry(ctx, key, e, actions[0], e[actions[0]], dev,
                   vendors[dev] if dev is not None else "nvidia", devices)
    if operation.vendors == {"amd"} and entry.vendor != "amd":
        raise entry.fail(f"'{entry.action}' applies to AMD devices only")
    if ("mig" in e or "ci" in e) and operation.name != "xid":
        where = "mig" if "mig" in e else "ci"
        raise ctx.fail(f"{key}.{where}", "'mig'/'ci' scope an XID to a MIG instance; only with "
                       "'xid'")
    args = TIMELINE_ARGS[operation.name](entry)
    return TimelineEvent(at, dev, operation.name, MappingProxyType(args))


def _xid_args(t: _Entry) -> dict[str, object]:
    if t.vendor == "amd":
        raise t.fail("AMD GPUs report no XIDs; use 'event' (vm_fault, ...)")
    args: dict[str, object] = {"code": _int(t.ctx, t.value, t.sub)}
    if t.device is None:
        return args
    device = t.devices[t.device]
    mig = _mig_position(t.ctx, t.raw["mig"], f"{t.key}.mig", device) if "mig" in t.raw else None
    if mig is not None:
        args["mig"] = mig
    ci = _ci_position(t.ctx, t.raw, t.key, device, mig)
    if ci is not None:
        args["ci"] = ci
    return args


def _recovery_args(t: _Entry) -> dict[str, object]:
    if t.vendor == "amd":
        raise t.fail("recovery actions are NVML's (nvmlEventTypeGpuRecoveryAction)")
    action_code = _int(t.ctx, t.value, t.sub)
    if action_code > 7:
        raise t.fail("expected 0..7 (nvmlDeviceGpuRecoveryAction_t)")
    return {"action": action_code}


def _ecc_args(t: _Entry) -> dict[str, object]:
    m = _mapping(t.ctx, t.value, t.sub, ("type",))
    kind = m.get("type", "single_bit")
    if kind not in ("single_bit", "double_bit"):
        raise t.fail(f"expected single_bit or double_bit, got {kind!r}", f"{t.sub}.type")
    return {"type": kind}


def _true_args(t: _Entry) -> dict[str, object]:
    """``lost: true``, ``recover: true``."""
    if t.value is not True:
        raise t.fail("expected 'true'")
    return {}


def _hang_args(t: _Entry) -> dict[str, object]:
    return {"ms": _int(t.ctx, t.value, t.sub)}


def _set_args(t: _Entry) -> dict[str, object]:
    m = _mapping(t.ctx, t.value, t.sub, vendor_readings(t.vendor))
    return {"values": MappingProxyType(_readings(t.ctx, m, t.sub, t.vendor))}


def _event_args(t: _Entry) -> dict[str, object]:
    m = _mapping(t.ctx, t.value, t.sub, ("type", "message"))
    kind = m.get("type")
    if kind not in amd_scenario.EVENT_KINDS:
        kinds = ", ".join(amd_scenario.EVENT_KINDS)
        raise t.fail(f"expected one of {kinds}, got {kind!r}", f"{t.sub}.type")
    return {"type": kind, "message": str(m.get("message", ""))}


def _fabric_args(t: _Entry) -> dict[str, object]:
    if t.vendor != "nvidia":
        raise t.fail("the GPU fabric probe is NVIDIA's (NVML)")
    try:
        fabric.readings(t.value, {"fabric_state": 0})  # checked now, applied on the node's state
    except fabric.FabricError as error:
        raise t.fail(str(error)) from error
    return {"fabric": t.value}


def _reset_args(t: _Entry) -> dict[str, object]:
    m = {} if t.value is True else _mapping(t.ctx, t.value, t.sub, ("ms",))
    return {"ms": _int(t.ctx, m.get("ms", 1000), f"{t.sub}.ms")}


def _chaos_fail_args(t: _Entry) -> dict[str, object]:
    return _fault_args(t.ctx, t.action, t.value, t.sub, t.device,
                       [d.vendor for d in t.devices])


def _driver_reload_args(t: _Entry) -> dict[str, object]:
    if t.value is not True:
        raise t.fail("expected 'true'")
    return {}


def _reset_required_args(t: _Entry) -> dict[str, object]:
    if not isinstance(t.value, bool):
        raise t.fail("expected true or false")
    if t.vendor != "nvidia":
        raise t.fail("'reset_required' applies to NVIDIA devices only")
    return {"on": t.value}


def _proc_add_args(t: _Entry) -> dict[str, object]:
    m = _mapping(t.ctx, t.value, t.sub,
                 ("pid", "used_memory_mib", "sm_util", "mem_util", "type"))
    if "pid" not in m:
        raise t.fail("missing key 'pid'")
    return {
        "pid": _int(t.ctx, m["pid"], f"{t.sub}.pid", minimum=1),
        "used_memory_mib": _num(t.ctx, m.get("used_memory_mib", 0), f"{t.sub}.used_memory_mib"),
        "sm_util": _num(t.ctx, m.get("sm_util", 0), f"{t.sub}.sm_util"),
        "mem_util": _num(t.ctx, m.get("mem_util", 0), f"{t.sub}.mem_util"),
        "type": m.get("type", "compute"),
    }


def _proc_rm_args(t: _Entry) -> dict[str, object]:
    m = _mapping(t.ctx, t.value, t.sub, ("pid",))
    if "pid" not in m:
        raise t.fail("missing key 'pid'")
    return {"pid": _int(t.ctx, m["pid"], f"{t.sub}.pid", minimum=1)}


# A timeline entry's arguments, by operation (``operations.OPERATIONS``: its timeline rows).
TIMELINE_ARGS: Mapping[str, Callable[[_Entry], dict[str, object]]] = {
    "xid": _xid_args,
    "ecc": _ecc_args,
    "lost": _true_args,
    "recover": _true_args,
    "hang": _hang_args,
    "set": _set_args,
    "proc_add": _proc_add_args,
    "proc_rm": _proc_rm_args,
    "event": _event_args,
    "reset": _reset_args,
    "recovery": _recovery_args,
    "chaos": _chaos_fail_args,
    "fail": _chaos_fail_args,
    "driver_reload": _driver_reload_args,
    "reset_required": _reset_required_args,
    "fabric": _fabric_args,
}



def _fault_args(  # noqa: PLR0917 - one timeline entry's parts
    ctx: _Ctx, action: str, v: object, key: str, dev: int | None, vendors: Sequence[str]
) -> dict[str, object]:
    """A `chaos` or `fail` entry, validated by the parser the control socket uses."""
    if not isinstance(v, Mapping):
        raise ctx.fail(key, "expected a mapping")
    try:
        if action == "chaos":
            if dev is not None:
                raise ctx.fail(key, "'chaos' is node-wide: name devices in chaos.devices")
            return parse_chaos(v, function_names(), len(vendors)).as_request()
        spec = parse_fail({**v, "device": dev}, function_names(), len(vendors))
    except FaultSpecError as exc:
        raise ctx.fail(key, str(exc)) from exc
    if dev is not None and vendors[dev] != "nvidia":
        raise ctx.fail(key, "'fail' applies to NVIDIA devices only")
    return spec.as_request()


_TOP = (
    "vendor",
    "driver_version",
    "cuda_driver_version",
    "nvml_version",
    "devices",
    "processes",
    "missing_symbols",
    "timeline",
    "amd_driver_version",
    "amd_rocm_version",
    "chaos",
    "capture",
)


def _rocm(ctx: _Ctx, raw: object) -> amd_partitions.Library:
    try:
        return amd_partitions.parse_rocm(raw)
    except ValueError as error:
        raise ctx.fail("amd_rocm_version", str(error)) from error


# Scenarios shipped in the wheel, so `--simulate h100-8gpu` works wherever the agent is
# installed (examples/scenarios/ links to them in a clone).
SHIPPED = Path(__file__).resolve().parent.parent / "scenarios"


def shipped_scenarios() -> tuple[str, ...]:
    return tuple(sorted(p.stem for p in SHIPPED.glob("*.yaml")))


def resolve_scenario(path: Path | str) -> Path:
    """A scenario file, or the name of one shipped with the simulator (``h100-8gpu``)."""
    path = Path(path)
    if path.exists() or path.parent != Path("."):
        return path
    shipped = SHIPPED / (path.name if path.suffix == ".yaml" else f"{path.name}.yaml")
    return shipped if shipped.is_file() else path


def load_scenario(path: Path | str | None, captures: Sequence[Path | str] = ()) -> Scenario:
    """Parse and validate a scenario file (or a shipped one, by name), and/or captures (`sim up
    --capture`); raises ScenarioError. Without a file, the captures alone make the node."""
    if path is None:
        if not captures:
            raise ScenarioError("a scenario file or at least one capture is needed")
        return parse_scenario("{}", Path(captures[0]), captures)
    path = resolve_scenario(path)
    try:
        # A regular UTF-8 file only (a FIFO is refused, never waited on), at most 1 MiB.
        text = read_text(path, "scenario")
    except FileRefused as exc:
        shipped = ", ".join(shipped_scenarios())
        raise ScenarioError(f"{exc} (scenarios shipped with the agent, by name: {shipped})"
                            ) from None
    return parse_scenario(text, path, captures)


# What the scenario parser takes from a capture's MIG and process entries; a capture format may
# emit more than this simulator serves: those keys are dropped and listed as not served.
def _mig_entry_keys() -> frozenset[str]:
    return frozenset(_GI_KEYS)


_PROCESS_KEYS = ("device", "pid", "spawn", "used_memory_mib", "sm_util", "mem_util", "type",
                 "mig", "partition", "ci", "pod")


def _load_captures(ctx: _Ctx, raw: object, base: Path,
                   extra: Sequence[Path | str]) -> tuple[CaptureFragment, ...]:
    listed: list[object] = [] if raw is None else (raw if isinstance(raw, list) else [raw])
    paths: list[Path] = []
    for j, entry in enumerate(listed):
        name = _str(ctx, entry, f"capture[{j}]" if isinstance(raw, list) else "capture")
        paths.append(base / name)
    paths.extend(Path(e) for e in extra)
    out = []
    for capture_path in paths:
        try:
            fragment = read_capture(capture_path)
        except CaptureError as exc:
            raise ScenarioError(str(exc)) from exc
        out.append(_servable(fragment))
    return tuple(out)


def _servable(fragment: CaptureFragment) -> CaptureFragment:
    """The fragment without the keys this simulator does not take (listed as not served)."""
    mig_keys = _mig_entry_keys()
    dropped: list[NotServed] = []
    devices = []
    for i, device in enumerate(fragment.devices):
        mig = device.get("mig")
        if isinstance(mig, list):
            kept = []
            for entry in mig:
                assert isinstance(entry, Mapping)
                for k, v in entry.items():
                    if k not in mig_keys:
                        dropped.append(NotServed(i, f"mig[gpu_instance_id="
                                                    f"{entry.get('gpu_instance_id')}].{k}",
                                                 str(v), "not a key of this simulator's GPU "
                                                 "instances"))
                kept.append({k: v for k, v in entry.items() if k in mig_keys})
        devices.append(MappingProxyType({**device, "mig": kept} if isinstance(mig, list)
                                        else dict(device)))
    processes = []
    for proc in fragment.processes:
        for k, v in proc.items():
            if k not in _PROCESS_KEYS:
                dropped.append(NotServed(int(str(proc.get("device", 0))),
                                         f"processes[pid={proc.get('pid')}].{k}", str(v),
                                         "not a process key of this simulator"))
        processes.append(MappingProxyType({k: v for k, v in proc.items()
                                           if k in _PROCESS_KEYS}))
    if not dropped:
        return fragment
    return dataclasses.replace(fragment, devices=tuple(devices), processes=tuple(processes),
                               not_served=(*fragment.not_served, *dropped))


def parse_scenario(text: str, path: Path, captures: Sequence[Path | str] = ()) -> Scenario:
    ctx = _Ctx(path)
    try:
        # No aliases: a few hundred bytes of nested ones ("billion laughs") expanded to
        # hundreds of millions of nodes (issue 39: 56 s and 918 MiB).
        node = yaml.compose(text, Loader=NoAliasLoader)
    except yaml.YAMLError as exc:
        raise ScenarioError(yaml_error(path, exc)) from exc
    if node is None:
        raise ScenarioError(f"{path}: empty scenario")
    top = _mapping(ctx, ctx.to_python(node, ""), "", _TOP)
    fragments = _load_captures(ctx, top.get("capture"), path.parent, captures)
    if fragments:
        top = _with_captures(ctx, top, fragments)
    vendor = top.get("vendor", "nvidia")
    if vendor != "nvidia":
        raise ctx.fail(
            "vendor",
            f"the node's default vendor is 'nvidia', got {vendor!r}; "
            "mark each AMD GPU with 'vendor: amd' in its device entry",
        )
    driver = str(top.get("driver_version", "580.95.05"))
    cuda = _int(ctx, top.get("cuda_driver_version", 13000), "cuda_driver_version", minimum=1000)
    nvml_version = str(top.get("nvml_version", f"{cuda // 1000}.{driver}"))
    raw_devices = top.get("devices")
    if not isinstance(raw_devices, list) or not raw_devices:
        raise ctx.fail("devices", "expected a non-empty list of devices")
    if len(raw_devices) > 64:
        raise ctx.fail("devices", "at most 64 devices")
    devices = tuple(_device(ctx, d, i) for i, d in enumerate(raw_devices))
    raw_procs = top.get("processes") or []
    if not isinstance(raw_procs, list):
        raise ctx.fail("processes", "expected a list")
    procs = tuple(_process(ctx, p, i, devices) for i, p in enumerate(raw_procs))
    raw_missing = top.get("missing_symbols") or []
    if not isinstance(raw_missing, list):
        raise ctx.fail("missing_symbols", "expected a list of NVML function names")
    known = set(function_names())
    for j, name in enumerate(raw_missing):
        if not isinstance(name, str) or not name.startswith("nvml") or not name.isidentifier():
            raise ctx.fail(f"missing_symbols[{j}]", f"not an NVML function name: {name!r}")
        if name not in known:
            raise ctx.fail(f"missing_symbols[{j}]", f"the simulator does not export {name!r}")
    raw_tl = top.get("timeline") or []
    if not isinstance(raw_tl, list):
        raise ctx.fail("timeline", "expected a list")
    timeline = tuple(_timeline(ctx, e, i, devices) for i, e in enumerate(raw_tl))
    chaos: dict[str, object] | None = None
    if top.get("chaos") is not None:
        raw_chaos = top["chaos"]
        if not isinstance(raw_chaos, Mapping):
            raise ctx.fail("chaos", "expected a mapping {seed, rate, codes, functions, ...}")
        try:
            chaos = parse_chaos(raw_chaos, function_names(), len(devices)).as_request()
        except FaultSpecError as exc:
            raise ctx.fail("chaos", str(exc)) from exc
    # Last, so a scenario's other mistakes are named first (they say more than the model).
    captured = sum(len(f.devices) for f in fragments)  # served as printed, first in the list
    for i, (raw, device) in enumerate(zip(raw_devices, devices, strict=True)):
        _known_model(ctx, f"devices[{i}].model", device.model, device.vendor, raw,
                     captured=i < captured)
    return Scenario(
        path=path.resolve(),
        vendor=str(vendor),
        driver_version=driver,
        cuda_driver_version=cuda,
        nvml_version=nvml_version,
        devices=devices,
        processes=procs,
        missing_symbols=tuple(str(m) for m in raw_missing),
        timeline=tuple(sorted(timeline, key=lambda t: t.at_s)),
        amd_driver_version=str(top.get("amd_driver_version", "6.10.5")),
        amd_library=_rocm(ctx, top.get("amd_rocm_version", amd_partitions.DEFAULT_ROCM)),
        chaos=MappingProxyType(chaos) if chaos is not None else None,
        captures=fragments,
    )


def _with_captures(ctx: _Ctx, top: dict[str, object],
                   fragments: Sequence[CaptureFragment]) -> dict[str, object]:
    """The scenario with the captures' GPUs first (in capture order), then its own devices.
    Node-wide values (driver version) are the scenario's own, else the first capture's."""
    own_devices = top.get("devices") or []
    own_processes = top.get("processes") or []
    if not isinstance(own_devices, list):
        raise ctx.fail("devices", "expected a list of devices")
    if not isinstance(own_processes, list):
        raise ctx.fail("processes", "expected a list")
    devices: list[object] = []
    processes: list[object] = []
    merged = dict(top)
    for fragment in fragments:
        if fragment.vendor != "nvidia":
            devices.extend({**d, "vendor": fragment.vendor} for d in fragment.devices)
        else:
            devices.extend(dict(d) for d in fragment.devices)
        offset = len(devices) - len(fragment.devices)
        processes.extend({**p, "device": int(str(p["device"])) + offset}
                         for p in fragment.processes)
        for key, value in fragment.system.items():
            merged.setdefault(key, value)
    # The file's own processes and timeline name devices of the combined list (the captures'
    # GPUs first): `{device: 0, xid: 79}` faults the first captured GPU.
    processes.extend(own_processes)
    devices.extend(own_devices)
    merged["devices"] = devices
    merged["processes"] = processes
    return merged
