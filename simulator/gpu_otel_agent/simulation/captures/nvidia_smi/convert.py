"""An :class:`~.model.SmiCapture` -> scenario entries (a :class:`CaptureFragment`).

Values are served as printed: numbers without their unit, ``Enabled``/``Yes``/``Active`` as 1,
``P0`` as 0. What the capture prints as not available (``N/A``, ``[N/A]``, ``Not Supported``,
``[Unknown Error]`` ...) becomes a ``null`` reading, which the simulated node answers with
NVML_ERROR_NOT_SUPPORTED. What cannot be served is listed in ``not_served`` with its reason.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from types import MappingProxyType

from gpu_otel_agent.plugins.nvidia.capture import fields
from gpu_otel_agent.simulation.captures.nvidia_smi.model import (
    GpuCapture,
    MigDeviceCapture,
    SmiCapture,
)
from gpu_otel_agent.simulation.captures.registry import CaptureFragment, NotServed
from gpu_otel_agent.simulation.nvidia import mig_profiles, models

_NOT_AVAILABLE = re.compile(
    r"^\[?\s*(n/a|not supported|unknown error|insufficient permissions|not found|no data|"
    r"gpu is lost|requested functionality has been deprecated|not available)\s*\]?$",
    re.IGNORECASE)
_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)")
_FLAGS = {"enabled": 1.0, "yes": 1.0, "active": 1.0, "on": 1.0,
          "disabled": 0.0, "no": 0.0, "not active": 0.0, "off": 0.0}
_COMPUTE_MODES = {"default": 0.0, "exclusive_thread": 1.0, "prohibited": 2.0,
                  "exclusive_process": 3.0}
NVML_PSTATE_UNKNOWN = 32.0
# Identity strings whose NVML call nvml.h documents NVML_ERROR_NOT_SUPPORTED for: printed N/A
# (a GeForce card's serial), the node answers so instead of inventing one.
_NOT_SUPPORTED_WHEN_NA = {"serial": "nvmlDeviceGetSerial",
                          "board_part": "nvmlDeviceGetBoardPartNumber"}


# Identity numbers NVML always answers: what the node serves when the capture printed N/A.
_UNPRINTED_IDENTITY: Mapping[str, str] = MappingProxyType({
    "architecture": "the model table's, else NVML_DEVICE_ARCH_UNKNOWN",
    "pci_device_id": "the model table's, else 0x000010DE (device id unknown)",
    "pci_subsystem_id": "the model table's, else 0",
})


class ConvertError(ValueError):
    """A value cannot be read as its field's kind."""


def not_available(printed: str) -> bool:
    return bool(_NOT_AVAILABLE.match(printed.strip()))


def number(printed: str, kind: str = "number") -> float | None:
    """A printed value as the scenario reading: None for not available."""
    text = printed.strip()
    if not_available(text):
        return None
    lowered = text.lower()
    if kind == "flag":
        if lowered not in _FLAGS:
            raise ConvertError(f"expected Enabled/Disabled, Yes/No or Active/Not Active, "
                               f"got {printed!r}")
        return _FLAGS[lowered]
    if kind == "pstate":
        match = re.match(r"^p(\d+)$", lowered)
        return float(match.group(1)) if match else NVML_PSTATE_UNKNOWN
    if kind == "compute_mode":
        if lowered not in _COMPUTE_MODES:
            raise ConvertError(f"unknown compute mode {printed!r}")
        return _COMPUTE_MODES[lowered]
    match = _NUMBER.match(text)
    if match is None:
        raise ConvertError(f"expected a number, got {printed!r}")
    return float(match.group(1))


def cuda_version(printed: str) -> int | None:
    """``12.2`` -> 12020 (nvmlSystemGetCudaDriverVersion's form)."""
    match = re.match(r"^\s*(\d+)\.(\d+)", printed)
    return int(match.group(1)) * 1000 + int(match.group(2)) * 10 if match else None


def convert(capture: SmiCapture, format_name: str) -> CaptureFragment:
    not_served: list[NotServed] = []
    system: dict[str, object] = {}
    if capture.driver_version and not not_available(capture.driver_version):
        version = re.match(r"^\s*(\d+(?:\.\d+)+)", capture.driver_version)
        if version is None:
            not_served.append(NotServed(None, "driver_version", capture.driver_version,
                                        "not a version number: the scenario's is served"))
        else:
            # Driver 610 prints a deprecation note after the number ("Driver Version" gives
            # way to "KMD Version"): only the number is the version (nvmlSystemGetDriverVersion).
            system["driver_version"] = version.group(1)
            if version.group(0).strip() != capture.driver_version.strip():
                not_served.append(NotServed(None, "driver_version", capture.driver_version,
                                            "only the leading version number is served"))
    if capture.cuda_version:
        cuda = cuda_version(capture.cuda_version)
        if cuda is not None:
            system["cuda_driver_version"] = cuda
    devices: list[Mapping[str, object]] = []
    processes: list[Mapping[str, object]] = []
    for i, gpu in enumerate(capture.gpus):
        device, gi_positions = _device(i, gpu, not_served)
        devices.append(MappingProxyType(device))
        processes.extend(_processes(i, gpu, gi_positions, not_served))
    return CaptureFragment(capture.source, format_name, "nvidia", MappingProxyType(system),
                           tuple(devices), tuple(processes), tuple(not_served))


def _device(i: int, gpu: GpuCapture, not_served: list[NotServed]
            ) -> tuple[dict[str, object], dict[int, tuple[int, dict[int, int]]]]:
    device: dict[str, object] = {}
    unsupported: list[str] = []
    for f in fields.IDENTITY:
        printed = gpu.values.get(f.key)
        if printed is None:
            continue
        if not_available(printed):
            call = _NOT_SUPPORTED_WHEN_NA.get(f.key)
            if call is not None:  # nvml.h documents NOT_SUPPORTED for it: served so
                unsupported.append(call)
                continue
            reason = _UNPRINTED_IDENTITY.get(
                f.key, "an identity string nvml.h gives no NOT_SUPPORTED for: the node serves "
                       "a generated one")
            not_served.append(NotServed(i, f.key, printed, reason))
            continue
        value = printed.strip()
        if f.key == "model" and value.endswith("..."):
            not_served.append(NotServed(i, f.key, printed, "cut short by nvidia-smi: not a "
                                        "model name; a generic model is served"))
            continue
        if f.key == "pci_bus_id" and re.match(r"^[0-9a-fA-F]{4}:", value):
            value = "0000" + value
        unreadable = _unreadable_identity(f.key, value)
        if unreadable is not None:
            not_served.append(NotServed(i, f.key, printed, unreadable))
            continue
        device[f.key] = value
    if unsupported:
        device["unsupported"] = unsupported
    if "model" not in device:
        if "model" not in gpu.values:  # nvidia-smi -q -d ...: which GPU is it?
            raise ConvertError(f"GPU {i} prints no product name: not a GPU the simulator "
                               "can serve (capture it without -d)")
        device["model"] = "NVIDIA GPU"  # printed cut short (listed above)
    for f in fields.READINGS:
        printed = gpu.values.get(f.key)
        if printed is None:
            continue
        try:
            device[f.key] = number(printed, f.kind)
        except ConvertError as exc:
            not_served.append(NotServed(i, f.key, printed, str(exc)))
            continue
        if printed.strip().lower().strip("[]") == "unknown error":
            not_served.append(NotServed(i, f.key, printed, "served as NOT_SUPPORTED, not "
                                        "NVML_ERROR_UNKNOWN"))
    _unplaced(i, gpu, not_served)
    if gpu.clock_events:
        device["clocks_event_reasons"] = _clock_mask(gpu.clock_events)
    gi_positions: dict[int, tuple[int, dict[int, int]]] = {}
    if gpu.mig_mode is not None and gpu.mig_mode.strip().lower() == "enabled":
        mig, gi_positions = _mig(i, str(device["model"]), gpu.mig_devices, device, not_served)
        if mig is not None:
            device["mig"] = mig
    return device, gi_positions


def _unreadable_identity(key: str, value: str) -> str | None:
    """Why a printed architecture or PCI id cannot be served as NVML's number, else None."""
    if key == "architecture" and value.lower() not in models.ARCHITECTURES:
        return ("an architecture nvml.h does not name: served as the model table's, else "
                "NVML_DEVICE_ARCH_UNKNOWN")
    if key in ("pci_device_id", "pci_subsystem_id") and not re.fullmatch(
            r"(0x)?[0-9a-fA-F]{1,8}", value):
        return "not a PCI id: served as the model table's, else 0"
    return None


def _unplaced(i: int, gpu: GpuCapture, not_served: list[NotServed]) -> None:
    for path, printed in gpu.unplaced:
        not_served.append(NotServed(i, path, printed, "met but not placed: no row of the field "
                                    "table knows this name (a newer driver's spelling?); the "
                                    "simulator's value for the model is served"))


def _clock_mask(events: Mapping[str, str]) -> float | None:
    if all(not_available(v) for v in events.values()):
        return None
    mask = 0
    for name, bit, _tag, _label in fields.CLOCK_EVENT_REASONS:
        if events.get(name, "").strip().lower() == "active":
            mask |= bit
    return float(mask)


def _profile_for(model: str, total_mib: float, memory: float | None, sms: int | None
                 ) -> mig_profiles.MigProfile | None:
    """The model's GPU instance profile of that memory (printed a little under its share of
    the GPU's) and SM count."""
    table = mig_profiles.mig_model(model)
    slice_mib = total_mib / mig_profiles.MEMORY_SLICES
    candidates = list(table.profiles.values())
    if memory is not None and slice_mib > 0:
        eighths = max(1, round(memory / slice_mib))
        candidates = [p for p in candidates if p.memory_slices == eighths]
    if sms is not None:  # each profile's own count: H100 3g.40gb has 60 SMs, not 3 x 16
        exact = [p for p in candidates if p.sms == sms]
        candidates = exact or candidates
    plain = [p for p in candidates if not p.name.endswith("+me")]
    chosen = plain or candidates
    return chosen[0] if chosen else None


def _mig(i: int, model: str, entries: tuple[MigDeviceCapture, ...], device: dict[str, object],
         not_served: list[NotServed]
         ) -> tuple[list[dict[str, object]] | None, dict[int, tuple[int, dict[int, int]]]]:
    """GPU instances in order of first appearance, each with its compute instances.

    Returns the scenario ``mig`` list and, per GPU instance id, (its position, {compute instance
    id: position}) for placing processes.
    """
    if model not in mig_profiles.MODELS:
        not_served.append(NotServed(i, "mig_devices", f"{len(entries)} MIG device(s)",
                                    f"the simulator has no MIG profile table for {model!r}"))
        return None, {}
    total = device.get("memory_total_mib")
    total_mib = float(total) if isinstance(total, float) else 0.0
    groups: dict[int, list[MigDeviceCapture]] = {}
    for entry in entries:
        groups.setdefault(entry.gpu_instance_id, []).append(entry)
    out: list[dict[str, object]] = []
    positions: dict[int, tuple[int, dict[int, int]]] = {}
    table = mig_profiles.mig_model(model)
    for gi, cis in groups.items():
        memory = number(cis[0].memory_total) if cis[0].memory_total else None
        sms = [c.sm_count for c in cis]
        gi_sms = sum(s for s in sms if s is not None) if all(s is not None for s in sms) else None
        profile = _profile_for(model, total_mib, memory, gi_sms)
        if profile is None:
            not_served.append(NotServed(i, f"mig_devices[gpu_instance_id={gi}]",
                                        f"{cis[0].memory_total}", "no profile of the model "
                                        "has that memory and SM count"))
            continue
        entry_out: dict[str, object] = {"profile": profile.name, "gpu_instance_id": gi}
        used = number(cis[0].memory_used) if cis[0].memory_used else None
        if used is not None:
            entry_out["memory_used_mib"] = used  # the GPU instance's, shared by its CIs
        if memory is not None:
            entry_out["memory_total_mib"] = memory
        if len(cis) == 1 and cis[0].compute_instance_id == 0:
            if cis[0].index is not None:  # one compute instance spanning the GPU instance
                entry_out["mig_index"] = cis[0].index
        else:
            entry_out["compute_instances"] = [_compute_instance(c, profile, gi_sms, table)
                                              for c in cis]
        positions[gi] = (len(out), {c.compute_instance_id: k for k, c in enumerate(cis)})
        out.append(entry_out)
    return out, positions


def _compute_instance(ci: MigDeviceCapture, gi_profile: mig_profiles.MigProfile,
                      gi_sms: int | None, table: mig_profiles.MigModel) -> dict[str, object]:
    """A compute instance: ``<n>c.<GPU instance profile>`` by its share of the SMs, no profile
    when it spans the GPU instance."""
    out: dict[str, object] = {"compute_instance_id": ci.compute_instance_id}
    if ci.sm_count and ci.sm_count != gi_sms and table.sms_per_slice:
        out["profile"] = f"{ci.sm_count // table.sms_per_slice}c.{gi_profile.name}"
    if ci.index is not None:
        out["mig_index"] = ci.index
    return out


_KINDS = {"c": "compute", "g": "graphics", "c+g": "compute", "m": "mps", "m+c": "mps"}


def _processes(i: int, gpu: GpuCapture, gi_positions: Mapping[int, tuple[int, dict[int, int]]],
               not_served: list[NotServed]) -> list[Mapping[str, object]]:
    out: list[Mapping[str, object]] = []
    for p in gpu.processes:
        entry: dict[str, object] = {"device": i, "pid": p.pid}
        kind = _KINDS.get(p.type.strip().lower())
        if kind is None:
            not_served.append(NotServed(i, f"processes[pid={p.pid}].type", p.type,
                                        "unknown process type: served as compute"))
            kind = "compute"
        elif p.type.strip().upper() == "C+G":
            not_served.append(NotServed(i, f"processes[pid={p.pid}].type", p.type,
                                        "one kind per scenario process: served as compute"))
        entry["type"] = kind
        used = number(p.used_memory) if p.used_memory else None
        if used is None:
            not_served.append(NotServed(i, f"processes[pid={p.pid}].used_memory",
                                        p.used_memory or "", "served as 0 MiB"))
        entry["used_memory_mib"] = used or 0.0
        if p.gpu_instance_id is not None:
            placed = gi_positions.get(p.gpu_instance_id)
            if placed is None:
                not_served.append(NotServed(i, f"processes[pid={p.pid}].gpu_instance_id",
                                            str(p.gpu_instance_id), "no such GPU instance "
                                            "served: the process runs on the whole GPU"))
            else:
                entry["mig"] = placed[0]
                ci = placed[1].get(p.compute_instance_id or 0)
                if ci is not None and len(placed[1]) > 1:
                    entry["ci"] = ci
        if p.name:
            not_served.append(NotServed(i, f"processes[pid={p.pid}].process_name", p.name,
                                        "the node answers nvmlSystemGetProcessName from "
                                        "/proc/<pid>/comm; the captured PID is not alive here"))
        out.append(MappingProxyType(entry))
    return out
