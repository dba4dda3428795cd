"""The ``nvidia-smi`` table (its default output) -> :class:`~.model.SmiCapture`.

Each GPU is two or three rows of three cells::

    |   0  NVIDIA H100 80GB HBM3          On  |   00000000:19:00.0 Off |                    0 |
    | N/A   27C    P0             72W /  700W |       1MiB /  81559MiB |      0%      Default |
    |                                         |                        |             Disabled |

(name, persistence mode | bus id, display active | volatile uncorrected ECC), (fan, temperature,
P-state, power draw / cap | memory used / total | GPU utilization, compute mode), (MIG mode).
Values keep their printed form and go through the same field keys as ``nvidia-smi -q``. A name
nvidia-smi cut short (``NVIDIA A100 80G...``) is not a model name: the converter lists it as not
served.
"""

from __future__ import annotations

import re
from pathlib import Path

from gpu_otel_agent.simulation.captures.nvidia_smi.model import (
    GpuCapture,
    ProcessCapture,
    SmiCapture,
)
from gpu_otel_agent.simulation.captures.nvidia_smi.tree import TreeError

_HEADER = re.compile(r"NVIDIA-SMI\s+(\S+)\s+Driver Version:\s+(\S+)\s+CUDA Version:\s+(\S+)")
_FIRST = re.compile(r"^\s*(\d+)\s+(.*?)\s+(On|Off|N/A)\s*$")
_SECOND = re.compile(r"^\s*(\S+)\s+(\S+)\s+(\S+)\s+(\S+)\s*/\s*(\S+)\s*$")
_MEMORY = re.compile(r"^\s*(\S+)\s*/\s*(\S+)\s*$")
_PROCESS = re.compile(r"^\|\s+(\d+)\s+(\S+)\s+(\S+)\s+(\d+)\s+(\S+)\s+(.*?)\s+(\d+MiB|N/A)\s*\|$")
_COMPUTE_MODES = {"Default": "Default", "E. Process": "Exclusive_Process",
                  "E. Thread": "Exclusive_Thread", "Prohibited": "Prohibited"}


def _cells(line: str) -> list[str] | None:
    if not line.startswith("|") or not line.rstrip().endswith("|"):
        return None
    cells = line.rstrip()[1:-1].split("|")
    return cells if len(cells) == 3 else None


def read(text: str, source: Path) -> SmiCapture:
    header = _HEADER.search(text)
    if header is None:
        raise TreeError("no 'NVIDIA-SMI ... Driver Version ... CUDA Version' header")
    lines = text.splitlines()
    gpus: list[GpuCapture] = []
    processes: dict[int, list[ProcessCapture]] = {}
    i = 0
    while i < len(lines):
        cells = _cells(lines[i])
        first = _FIRST.match(cells[0]) if cells else None
        nxt = _cells(lines[i + 1]) if i + 1 < len(lines) else None
        second = _SECOND.match(nxt[0]) if nxt else None
        if cells is None or first is None or nxt is None or second is None:
            process = _PROCESS.match(lines[i].rstrip())
            if process is not None:
                gpu, gi, ci, pid, kind, name, used = process.groups()
                processes.setdefault(int(gpu), []).append(ProcessCapture(
                    int(pid), kind, name, used, None if gi == "N/A" else int(gi),
                    None if ci == "N/A" else int(ci)))
            i += 1
            continue
        values: dict[str, str] = {}
        values["model"] = first.group(2).strip()
        values["persistence_mode"] = first.group(3)
        bus = cells[1].split()
        if bus:
            values["pci_bus_id"] = bus[0]
        if len(bus) > 1:
            values["display_active"] = bus[1]
        values["ecc_dbe_volatile"] = cells[2].strip()
        fan, temp, perf, power, cap = second.groups()
        # Pwr:Usage is nvmlDeviceGetPowerUsage (the 1 s average where the GPU averages): served
        # as instant and average alike, as the -q readers do for a single "Power Draw".
        values.update(fan_percent=fan, temperature_c=temp, pstate=perf, power_w=power,
                      power_average_w=power, power_limit_w=cap)
        memory = _MEMORY.match(nxt[1])
        if memory is not None:
            values["memory_used_mib"], values["memory_total_mib"] = memory.groups()
        util = nxt[2].split(None, 1)
        if util:
            values["utilization_gpu"] = util[0]
        if len(util) > 1:
            values["compute_mode"] = _COMPUTE_MODES.get(util[1].strip(), util[1].strip())
        mig_mode = None
        third = _cells(lines[i + 2]) if i + 2 < len(lines) else None
        if third is not None and not third[0].strip() and third[2].strip():
            mig_mode = third[2].strip()
            i += 1
        index = int(first.group(1))
        gpus.append(GpuCapture(values, {}, mig_mode, (), ()))
        processes.setdefault(index, [])
        i += 2
    if not gpus:
        raise TreeError("no GPU rows in the table")
    gpus = [GpuCapture(g.values, g.clock_events, g.mig_mode, g.mig_devices,
                       tuple(processes.get(n, ()))) for n, g in enumerate(gpus)]
    return SmiCapture(source, "table", None, header.group(2), header.group(3), tuple(gpus))
