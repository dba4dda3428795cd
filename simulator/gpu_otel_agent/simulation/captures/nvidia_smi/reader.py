"""A parsed ``nvidia-smi -q`` tree (either form) -> :class:`~.model.SmiCapture`."""

from __future__ import annotations

import re
from pathlib import Path

from gpu_otel_agent.plugins.nvidia.capture import fields
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
        header = {k: lookup(root, k) for k in ("timestamp", "driver_version", "cuda_version")}
    else:
        gpu_nodes = [(n, n.name[4:].strip()) for n in root.children if n.name.startswith("GPU ")]
        header = {"timestamp": lookup(root, "Timestamp"),
                  "driver_version": lookup(root, "Driver Version"),
                  "cuda_version": lookup(root, "CUDA Version")}
    if not gpu_nodes:
        raise TreeError("no GPU in the capture")
    gpus = tuple(_gpu(node, bus, xml) for node, bus in gpu_nodes)
    return SmiCapture(source, form, header["timestamp"], header["driver_version"],
                      header["cuda_version"], gpus)


def _gpu(node: Node, bus: str | None, xml: bool) -> GpuCapture:
    values: dict[str, str] = {}
    for f in fields.FIELDS:
        for path in f.xml if xml else f.text:
            found = (bus if path == "@id" else lookup(node, path))
            if found is not None:
                values[f.key] = found
                break
    return GpuCapture(
        values=values,
        clock_events=_clock_events(node, xml),
        mig_mode=lookup(node, "mig_mode/current_mig" if xml else "MIG Mode/Current"),
        mig_devices=_mig_devices(node, xml),
        processes=_processes(node, xml),
    )


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
        keys = ("Index", "GPU Instance ID", "Compute Instance ID",
                "Device Attributes/Shared/Multiprocessor count", "FB Memory Usage/Total",
                "FB Memory Usage/Used")
    out = []
    for entry in entries:
        index, gi, ci, sms, total, used = (lookup(entry, k) for k in keys)
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
