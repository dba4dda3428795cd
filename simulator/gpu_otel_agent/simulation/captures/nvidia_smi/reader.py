"""A parsed ``nvidia-smi -q`` tree (either form) -> :class:`~.model.SmiCapture`."""

from __future__ import annotations

import re
from pathlib import Path

from gpu_otel_agent.plugins.nvidia.capture import fields
from gpu_otel_agent.simulation.captures.nvidia_smi import limits
from gpu_otel_agent.simulation.captures.nvidia_smi.model import (
    GpuCapture,
    MigDeviceCapture,
    ProcessCapture,
    SmiCapture,
)
from gpu_otel_agent.simulation.captures.nvidia_smi.tree import Node, TreeError, lookup


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    match = re.match(r"^\s*(\d+)", value)
    return int(match.group(1)) if match else None


def read(root: Node, form: str, source: Path) -> SmiCapture:
    xml = form == "xml"
    if xml:
        gpu_nodes = [(n, n.attrs.get("id")) for n in root.all("gpu")]
        header = {"timestamp": lookup(root, "timestamp"),
                  "driver_version": _first(root, fields.DRIVER_VERSION_XML),
                  "cuda_version": _first(root, fields.CUDA_VERSION_XML)}
    else:
        gpu_nodes = [(n, n.name[4:].strip()) for n in root.children if n.name.startswith("GPU ")]
        header = {"timestamp": lookup(root, "Timestamp"),
                  "driver_version": _first(root, fields.DRIVER_VERSION_TEXT),
                  "cuda_version": _first(root, fields.CUDA_VERSION_TEXT)}
    if not gpu_nodes:
        raise TreeError("no GPU in the capture")
    gpus = tuple(_gpu(node, bus, xml) for node, bus in gpu_nodes)
    return SmiCapture(source, form, header["timestamp"], header["driver_version"],
                      header["cuda_version"], gpus)


def _first(node: Node, paths: tuple[str, ...]) -> str | None:
    return next((v for v in (lookup(node, p) for p in paths) if v is not None), None)


def _gpu(node: Node, bus: str | None, xml: bool) -> GpuCapture:
    values: dict[str, str] = {}
    consumed: set[str] = set()
    for f in fields.FIELDS:
        for path in f.xml if xml else f.text:
            found = (bus if path == "@id" else lookup(node, path))
            if found is not None:
                values[f.key] = found
                break
        # Every spelling a row knows is placed, printed or not (a capture may print two).
        consumed.update(p for path in (f.xml if xml else f.text) for p in path.split("+"))
    tlimit = fields.TLIMIT_SLOWDOWN_XML if xml else fields.TLIMIT_SLOWDOWN_TEXT
    consumed.update(p for alternatives in tlimit for p in alternatives)
    slowdown = values.get("temperature_slowdown_c")
    if slowdown is None or _not_a_number(slowdown):
        derived = _tlimit_slowdown(node, tlimit)
        if derived is not None:
            values["temperature_slowdown_c"] = derived
    return GpuCapture(
        values=values,
        clock_events=_clock_events(node, xml),
        mig_mode=lookup(node, "mig_mode/current_mig" if xml else "MIG Mode/Current"),
        mig_devices=_mig_devices(node, xml),
        processes=_processes(node, xml),
        unplaced=unplaced(node, xml, consumed),
    )


def _number(printed: str | None) -> float | None:
    match = re.match(r"^\s*(-?\d+(?:\.\d+)?)\s*C?\s*$", printed or "")
    return float(match.group(1)) if match else None


def _not_a_number(printed: str) -> bool:
    return _number(printed) is None


def _tlimit_slowdown(node: Node, paths: tuple[tuple[str, ...], ...]) -> str | None:
    """The absolute slowdown threshold from the T.Limit-relative one (``fields``), as
    nvidia-smi would print it ("89 C"); None unless all three are printed as numbers."""
    current, margin, threshold = (_number(_first(node, p)) for p in paths)
    if current is None or margin is None or threshold is None:
        return None
    return f"{current + margin - threshold:g} C"


def _norm(name: str) -> str:
    return re.sub(r"\s+", " ", name.replace("_", " ")).strip().lower()


def _watched(xml: bool) -> set[str]:
    """The section paths whose leaves the reader accounts for: every section a single-path
    field reads from (the GPU's own top level included, its direct leaves only)."""
    sections: set[str] = set()
    for f in fields.FIELDS:
        for path in f.xml if xml else f.text:
            if "+" in path or path.startswith("@"):
                continue
            sections.add(path.rpartition("/")[0])
    return sections


def unplaced(node: Node, xml: bool, consumed: set[str]) -> tuple[tuple[str, str], ...]:
    """Leaves of the watched sections that are neither read nor known to be unserved."""
    ignored = limits.unread_names()
    sections = _watched(xml)
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for section in sorted(sections):
        holder = node if not section else node.path(section)
        if holder is None:
            continue
        for path, leaf in _leaves(holder, section, recurse=bool(section)):
            if path in seen or path in consumed or _norm(leaf.name) in ignored:
                continue
            seen.add(path)
            if any(path.startswith(s + "/") for s in sections if s and s != section
                   and s.startswith(section)):
                continue  # a deeper watched section reports it
            out.append((path, leaf.value or ""))
    return tuple(out)


def _leaves(holder: Node, prefix: str, recurse: bool) -> list[tuple[str, Node]]:
    out: list[tuple[str, Node]] = []
    for child in holder.children:
        path = f"{prefix}/{child.name}" if prefix else child.name
        if child.children:
            if recurse:
                out.extend(_leaves(child, path, recurse))
            continue
        if child.value is not None:
            out.append((path, child))
    return out


def _clock_events(node: Node, xml: bool) -> dict[str, str]:
    out: dict[str, str] = {}
    if xml:
        for section, prefix in fields.CLOCK_EVENTS_XML:
            found = node.child(section)
            if found is None:
                continue
            for name, _bit, tag, _label in fields.CLOCK_EVENT_REASONS:
                value = lookup(found, prefix + tag)
                if value is not None:
                    out[name] = value
            break
        return out
    for section in fields.CLOCK_EVENTS_TEXT:
        found = node.child(section)
        if found is None:
            continue
        for name, _bit, _tag, label in fields.CLOCK_EVENT_REASONS:
            hit = found.find(label)  # HW Thermal Slowdown nests under HW Slowdown
            if hit is not None and hit.value is not None:
                out[name] = hit.value
        break
    return out


def _mig_devices(node: Node, xml: bool) -> tuple[MigDeviceCapture, ...]:
    if xml:
        holder = node.child("mig_devices")
        entries = holder.all("mig_device") if holder is not None else []
        keys = ("index", "gpu_instance_id", "compute_instance_id",
                "device_attributes/shared/multiprocessor_count", "fb_memory_usage/total",
                "fb_memory_usage/used")
    else:
        entries = [n for n in node.descendants() if n.name == "MIG Device"]
        # Newer drivers print a MIG device's memory as "Shared FB Memory Usage" (NVIDIA's
        # nvidia-smi documentation, change log: "shared among the MIG devices associated with
        # the same GPU instance").
        memory = ("Shared FB Memory Usage", "FB Memory Usage")
        holder_of = {e_id: next((m for m in memory if e.child(m) is not None), memory[1])
                     for e_id, e in enumerate(entries)}
        keys = ("Index", "GPU Instance ID", "Compute Instance ID",
                "Device Attributes/Shared/Multiprocessor count", "{fb}/Total", "{fb}/Used")
    out = []
    for n, entry in enumerate(entries):
        index, gi, ci, sms, total, used = (
            lookup(entry, k if xml else k.replace("{fb}", holder_of[n])) for k in keys)
        gi_id, ci_id = _int(gi), _int(ci)
        if gi_id is None or ci_id is None:
            raise TreeError("a MIG device without GPU/compute instance ids")
        out.append(MigDeviceCapture(_int(index), gi_id, ci_id, _int(sms), total, used))
    return tuple(out)


def _processes(node: Node, xml: bool) -> tuple[ProcessCapture, ...]:
    if xml:
        holder = node.child("processes")
        out = []
        for info in holder.all("process_info") if holder is not None else []:
            pid = _int(lookup(info, "pid"))
            if pid is None:
                continue
            out.append(ProcessCapture(
                pid, lookup(info, "type") or "C", lookup(info, "process_name") or "",
                lookup(info, "used_memory"), _int(lookup(info, "gpu_instance_id")),
                _int(lookup(info, "compute_instance_id"))))
        return tuple(out)
    holder = node.child("Processes")
    if holder is None:
        return ()
    # Text: flat runs of "GPU instance ID", "Compute instance ID", "Process ID" (with Type,
    # Name, Used GPU Memory beneath it, or beside it on some drivers).
    records: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for child in holder.children:
        if child.name in ("GPU instance ID", "Process ID") and "Process ID" in current:
            records.append(current)
            current = {}
        current[child.name] = child.value or ""
        for sub in child.children:
            current[sub.name] = sub.value or ""
    if "Process ID" in current:
        records.append(current)
    out = []
    for rec in records:
        pid = _int(rec.get("Process ID"))
        if pid is None:
            continue
        out.append(ProcessCapture(pid, rec.get("Type", "C"), rec.get("Name", ""),
                                  rec.get("Used GPU Memory"), _int(rec.get("GPU instance ID")),
                                  _int(rec.get("Compute instance ID"))))
    return tuple(out)
