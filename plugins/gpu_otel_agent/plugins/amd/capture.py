"""``amd-smi static/metric --json`` captures: written from the node the agent sees
(``gpu-agent capture --vendor amd``) and read as numbers.

amd-smi prints one object per GPU: a JSON list up to ROCm 6.x, ``{"gpu_data": [...]}`` from ROCm
7 (ROCm/amdsmi issue 134). A value is ``{"value": N, "unit": U}`` or a bare number; what the
library could not read is ``"N/A"``. :data:`FIELDS` is the one table from a capture's field to
the scenario reading a simulated node serves it as and the metric the agent exports, used to
write a capture, to read one back (the simulator's ``gpu_otel_agent.simulation.captures.amd_smi``
replays it as simulated GPUs) and to compare the agent's export with it.
"""
from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MIB = 1024 * 1024
_UNIT_MIB = {"B": 1 / MIB, "KB": 1 / 1024, "MB": 1.0, "GB": 1024.0}



class AmdCaptureError(ValueError):
    """The file is not amd-smi JSON this reader understands; the message says why."""


Source = Callable[[Any, Any], "float | None"]  # (amdsmi module, handle) -> the printed number


@dataclass(frozen=True)
class Field:
    path: tuple[str, ...]  # keys into one GPU's object
    reading: str  # the scenario reading the node serves it as
    metric: str  # what the agent exports from it
    attributes: tuple[tuple[str, str], ...] = ()
    to_reading: Callable[[float, str], float] = lambda v, _unit: v
    to_metric: Callable[[float], float] = lambda v: v
    unit: str = ""  # as amd-smi prints it
    source: Source | None = None  # how `gpu-agent capture` reads it (None: not written)


def _number(raw: Any) -> float | None:
    return float(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else None


def _activity(key: str) -> Source:
    def read(smi: Any, h: Any) -> float | None:
        value = _number(smi.amdsmi_get_gpu_activity(h)[key])
        return None if value is None or value > 100 else value

    return read


def _temperature(sensor: str) -> Source:
    def read(smi: Any, h: Any) -> float | None:
        try:
            return _number(smi.amdsmi_get_temp_metric(
                h, smi.AmdSmiTemperatureType[sensor], smi.AmdSmiTemperatureMetric.CURRENT))
        except smi.AmdSmiLibraryException:
            return None

    return read


def _socket_power(smi: Any, h: Any) -> float | None:
    value = _number(smi.amdsmi_get_power_info(h)["socket_power"])
    return None if value is None or value >= 0xFFFF else value


def _vram(key: str) -> Source:
    def read(smi: Any, h: Any) -> float | None:
        return _number(smi.amdsmi_get_gpu_vram_usage(h)[key])

    return read


def _mib(value: float, unit: str) -> float:
    return value * _UNIT_MIB.get(unit.upper(), 1.0)


FIELDS: tuple[Field, ...] = (
    Field(("usage", "gfx_activity"), "utilization_gpu", "hw.gpu.utilization",
          (("hw.gpu.task", "general"),), to_metric=lambda v: v / 100, unit="%",
          source=_activity("gfx_activity")),
    Field(("usage", "umc_activity"), "utilization_memory", "gpu.memory.controller.utilization",
          to_metric=lambda v: v / 100, unit="%", source=_activity("umc_activity")),
    Field(("usage", "mm_activity"), "utilization_mm", "gpu.multimedia.utilization",
          to_metric=lambda v: v / 100, unit="%", source=_activity("mm_activity")),
    Field(("power", "socket_power"), "power_w", "hw.power", unit="W", source=_socket_power),
    Field(("temperature", "edge"), "temperature_c", "hw.temperature",
          (("hw.sensor_location", "edge"),), unit="C", source=_temperature("EDGE")),
    Field(("temperature", "hotspot"), "hotspot_temperature_c", "hw.temperature",
          (("hw.sensor_location", "gpu"),), unit="C", source=_temperature("HOTSPOT")),
    Field(("temperature", "mem"), "memory_temperature_c", "hw.temperature",
          (("hw.sensor_location", "memory"),), unit="C", source=_temperature("VRAM")),
    Field(("mem_usage", "total_vram"), "memory_total_mib", "hw.gpu.memory.limit",
          to_reading=_mib, to_metric=lambda v: v * MIB, unit="MB", source=_vram("vram_total")),
    Field(("mem_usage", "used_vram"), "memory_used_mib", "hw.gpu.memory.usage",
          to_reading=_mib, to_metric=lambda v: v * MIB, unit="MB", source=_vram("vram_used")),
    Field(("vram", "size"), "memory_total_mib", "hw.gpu.memory.limit",
          to_reading=_mib, to_metric=lambda v: v * MIB),
)
# Identity: capture path -> scenario device key.
IDENTITY: tuple[tuple[tuple[str, ...], str], ...] = (
    (("asic", "market_name"), "model"),
    (("bus", "bdf"), "pci_bus_id"),
    (("asic", "asic_serial"), "serial"),
)


def lookup(gpu: Mapping[str, Any], path: tuple[str, ...]) -> Any:
    node: Any = gpu
    for key in path:
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def value_of(raw: Any) -> tuple[float, str] | None:
    """(number, unit) of a printed value; None for ``"N/A"`` and anything not a number."""
    unit = ""
    if isinstance(raw, Mapping):
        unit = str(raw.get("unit", ""))
        raw = raw.get("value")
    if isinstance(raw, bool) or not isinstance(raw, int | float):
        return None
    return float(raw), unit


def gpus(text: str, source: Path | str = "<capture>") -> list[Mapping[str, Any]]:
    """The per-GPU objects of an amd-smi JSON output."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise AmdCaptureError(f"{source}: not JSON: {error}") from error
    if isinstance(data, Mapping):
        data = data.get("gpu_data")
    if not isinstance(data, list) or not all(isinstance(g, Mapping) and "gpu" in g
                                             for g in data):
        raise AmdCaptureError(f"{source}: expected amd-smi --json output: a list of objects "
                              "with a 'gpu' key (or {'gpu_data': [...]})")
    return sorted(data, key=lambda g: int(g["gpu"]))


def expected_metrics(text: str) -> list[list[tuple[Field, float | None]]]:
    """Per GPU: each field the capture shows and the metric value the agent should export
    (None: absent)."""
    out = []
    for gpu in gpus(text):
        rows: list[tuple[Field, float | None]] = []
        for field in FIELDS:
            raw = lookup(gpu, field.path)
            if raw is None:
                continue
            got = value_of(raw)
            rows.append((field, None if got is None else
                         field.to_metric(field.to_reading(*got))))
        out.append(rows)
    return out


def capture_json(smi: Any, handles: list[Any]) -> str:
    """What amdsmi shows of ``handles`` as ``amd-smi static/metric --json`` prints it (ROCm 7's
    ``gpu_data`` form), through :data:`FIELDS`: one object per processor, as amd-smi lists them
    (a partitioned GPU's partitions each on their own); what the library cannot read is
    ``"N/A"``. What ``gpu-agent capture`` writes for AMD GPUs; read back by
    :func:`gpu_otel_agent.simulation.captures.amd_smi.scenario_devices`."""
    out = []
    for index, handle in enumerate(handles):
        asic = smi.amdsmi_get_gpu_asic_info(handle)
        gpu: dict[str, Any] = {
            "gpu": index,
            "asic": {"market_name": str(asic["market_name"]),
                     "asic_serial": str(asic.get("asic_serial", "N/A"))},
            "bus": {"bdf": str(smi.amdsmi_get_gpu_device_bdf(handle))},
        }
        for field in FIELDS:
            if field.source is None:
                continue
            try:
                value = field.source(smi, handle)
            except smi.AmdSmiLibraryException:
                value = None
            section = gpu.setdefault(field.path[0], {})
            section[field.path[1]] = "N/A" if value is None else {
                "value": int(value) if float(value).is_integer() else value, "unit": field.unit}
        out.append(gpu)
    return json.dumps({"gpu_data": out}, indent=4) + "\n"
