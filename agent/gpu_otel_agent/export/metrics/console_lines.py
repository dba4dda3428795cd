"""``exporter: console`` for a person (``console_format: lines``): one line per GPU per export
(the events' lines are ``events/console_lines.py``; both name a GPU alike, ``device_name``),
instead of the OpenTelemetry SDK's JSON dump (about 17,000 lines per export of the simulated
8-GPU node).

A GPU line says what ``gpu-agent top`` says of it: utilization, memory, temperature, power and
health, each ``-`` where the device did not give it this cycle (absent, never 0). A GPU is
named by its vendor and index (``NVIDIA 0``, ``AMD 0``: a mixed node has a GPU 0 of each), a
partition by its parent's name, its scheme and profile, and its UUID (two 1g.10gb instances
of one GPU differ only there). ``console_format: otlp-json`` keeps the full OTLP data.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from typing import TextIO

from gpu_otel_agent.model.snapshot import (
    VENDOR_NAMES,
    DeviceSnapshot,
    NodeSnapshot,
    Reading,
    device_name,
)

GIB = 1024**3


def clock(time_ns: int) -> str:
    return time.strftime("%H:%M:%S", time.localtime(time_ns / 1e9))


def _value(readings: Iterable[Reading], metric: str, **attributes: str) -> float | None:
    for reading in readings:
        if reading.metric == metric and all(
                dict(reading.attributes).get(k) == v for k, v in attributes.items()):
            return float(reading.value)
    return None


def _format(value: float | None, text: str) -> str:
    return "-" if value is None else text.format(value)


def device_line(device: DeviceSnapshot, snapshot: NodeSnapshot) -> str:
    identity = device.identity
    name = device_name(identity.vendor, identity.index)
    if identity.partition is not None:
        name += f" {identity.partition.kind} {identity.partition.profile} {identity.uuid}"
    readings = [r for sample in device.samples.values() for r in sample.readings]
    used = _value(readings, "hw.gpu.memory.usage")
    total = _value(readings, "hw.gpu.memory.limit")
    utilization = _value(readings, "hw.gpu.utilization", **{"hw.gpu.task": "general"})
    # The unit stays when a side is unknown ("-/- GiB" for a lost GPU): every line keeps
    # its shape, for a reader's eye and a grep alike.
    memory = (("-" if used is None else f"{used / GIB:.1f}") + "/"
              + ("-" if total is None else f"{total / GIB:.1f}") + " GiB")
    health = snapshot.health_of(identity.uuid)
    state = health.state.value + (f" ({health.reason})" if health.reason else "")
    fields = (
        f"util {_format(None if utilization is None else utilization * 100, '{:.0f}%')}",
        f"mem {memory}",
        _format(_value(readings, "hw.temperature", **{"hw.sensor_location": "gpu"}),
                "{:.0f}C"),
        _format(_value(readings, "hw.power"), "{:.0f}W"),
        f"health {state}",
    )
    # The vendor is named once: "NVIDIA 0 H100 80GB HBM3", as top shows the model.
    model = identity.model.removeprefix(f"{VENDOR_NAMES.get(identity.vendor, '')} ")
    return f"{clock(snapshot.taken_ns)} {name} {model}: {'  '.join(fields)}"


def snapshot_lines(snapshot: NodeSnapshot) -> list[str]:
    devices = sorted(snapshot.devices, key=lambda d: (d.identity.vendor, d.identity.order))
    return [device_line(device, snapshot) for device in devices]


class LinesSnapshotExporter:
    """A SnapshotExporter printing one line per GPU (``export/metrics/snapshot_exporters.py``)."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self._stream = stream

    def export(self, snapshot: NodeSnapshot, timeout_s: float) -> bool:
        stream = self._stream or sys.stdout
        stream.write("".join(line + "\n" for line in snapshot_lines(snapshot)))
        stream.flush()
        return True

    def shutdown(self, timeout_s: float) -> None:
        return None
