"""``exporter: console`` for a person: one line per GPU per export, one per event."""

from __future__ import annotations

import io
import re
from types import MappingProxyType

from gpu_otel_agent.export.events.console_lines import event_line
from gpu_otel_agent.export.metrics.console_lines import LinesSnapshotExporter
from gpu_otel_agent.gpu_health.events import HealthEvent
from gpu_otel_agent.gpu_health.severity import Severity
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DevicePartition,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
)

GIB = 1024**3


def _device(vendor: str, index: int, uuid: str, readings: tuple[Reading, ...] = (), *,
            partition: DevicePartition | None = None, model: str = "X") -> DeviceSnapshot:
    identity = DeviceIdentity(uuid, index, vendor, model, f"0000:{index:02x}:00.0",
                              partition=partition)
    samples = {"fast": GroupSample("fast", readings, 1)} if readings else {}
    return DeviceSnapshot(identity, HealthState.OK, 0, MappingProxyType(samples))


def _print(*devices: DeviceSnapshot) -> list[str]:
    out = io.StringIO()
    assert LinesSnapshotExporter(out).export(NodeSnapshot(devices, 1_700_000_000_000_000_000),
                                              1.0)
    return out.getvalue().splitlines()


def test_one_line_per_gpu_with_what_it_served() -> None:
    readings = (Reading("hw.gpu.utilization", 0.37, (("hw.gpu.task", "general"),)),
                Reading("hw.gpu.utilization", 0.99, (("hw.gpu.task", "encoder"),)),
                Reading("hw.gpu.memory.usage", 20 * GIB), Reading("hw.gpu.memory.limit", 80 * GIB),
                Reading("hw.temperature", 61, (("hw.sensor_location", "gpu"),)),
                Reading("hw.temperature", 70, (("hw.sensor_location", "memory"),)),
                Reading("hw.power", 512.4))
    (line,) = _print(_device("nvidia", 0, "GPU-a", readings, model="NVIDIA H100 80GB HBM3"))
    assert re.fullmatch(r"\d\d:\d\d:\d\d NVIDIA 0 H100 80GB HBM3: util 37%  "
                        r"mem 20\.0/80\.0 GiB  61C  512W  health ok", line), line


def test_what_a_gpu_did_not_serve_is_a_dash_never_zero() -> None:
    (line,) = _print(_device("amd", 1, "GPU-b"))
    assert line.endswith("AMD 1 X: util -  mem -/- GiB  -  -  health ok"), line


def test_a_mixed_node_and_partitions_have_distinct_names() -> None:
    mig = [DevicePartition("GPU-a", "mig", "1g.10gb") for _ in range(2)]
    lines = _print(_device("nvidia", 0, "GPU-a"), _device("amd", 0, "AMD-0"),
                   _device("nvidia", 0, "MIG-1", partition=mig[0]),
                   _device("nvidia", 0, "MIG-2", partition=mig[1]))
    names = [line.split(" ", 1)[1].split(" X:")[0] for line in lines]
    assert names == ["AMD 0", "NVIDIA 0", "NVIDIA 0 mig 1g.10gb MIG-1",
                     "NVIDIA 0 mig 1g.10gb MIG-2"]


def test_an_event_is_one_line_naming_the_gpu_the_xid_and_whom_it_hit() -> None:
    event = HealthEvent("gpu.xid", 1_700_000_000_000_000_000, Severity.FATAL, "GPU fell off",
                        (("hw.vendor", "NVIDIA"), ("gpu.index", 2), ("gpu.xid.code", 79),
                         ("gpu.xid.name", "GPU_FALLEN_OFF_BUS"),
                         ("gpu.xid.action", "RESTART_BM")),
                        workloads=((("process.pid", 7), ("k8s.pod.name", "train-0"),
                                    ("k8s.namespace.name", "ml")),
                                   (("process.pid", 8), ("process.executable.name", "python"))))
    line = event_line(event)
    assert "\n" not in line
    assert re.fullmatch(r"\d\d:\d\d:\d\d EVENT FATAL gpu\.xid NVIDIA 2: XID 79 "
                        r"GPU_FALLEN_OFF_BUS -> RESTART_BM: GPU fell off "
                        r"\(hit: ml/train-0, python\(8\)\)", line), line
