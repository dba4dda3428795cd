"""A series' end point shares the attribute encoding its live points had: ending every
process series at once (a reload that turns the processes group off, at 8 x 2,048) encodes
no attribute set a second time (it added 5 MiB of encodings at that node)."""

from __future__ import annotations

from typing import Any

import pytest
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.otlp import wire_values
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
)

RESOURCE = Resource.create({"service.name": "gpu-otel-agent", "host.name": "node-1"})
IDENTITY = DeviceIdentity("GPU-0", 0, "nvidia", "H100", "0000:18:00.0")
PIDS = range(100, 150)


def _snapshot(step: int, pids: range) -> NodeSnapshot:
    readings = (Reading("hw.power", 300.0 + step),
                *(Reading("gpu.process.memory.usage", pid * 1024 + step,
                          (("process.pid", pid), ("process.executable.name", "python")))
                  for pid in pids))
    device = DeviceSnapshot(IDENTITY, HealthState.OK, 10).with_sample(
        GroupSample("fast", readings, 1_000 + step))
    return NodeSnapshot((device,), taken_ns=5_000 + step)


def test_end_points_encode_no_attribute_set_again(monkeypatch: pytest.MonkeyPatch) -> None:
    encoder = ProtoEncoder(RESOURCE)
    encoder.encode_bytes(_snapshot(0, PIDS))
    encoder.encode_bytes(_snapshot(1, PIDS))
    calls: list[str] = []
    real = wire_values.key_value

    def counted(key: str, value: Any) -> bytes:
        calls.append(key)
        return real(key, value)

    monkeypatch.setattr(wire_values, "key_value", counted)
    request = encoder.encode(_snapshot(2, range(0)))  # every process series ends
    ended = [point for rm in request.resource_metrics for sm in rm.scope_metrics
             for metric in sm.metrics if metric.name == "gpu.process.memory.usage"
             for point in metric.gauge.data_points]
    assert sorted(next(a.value.int_value for a in p.attributes if a.key == "process.pid")
                  for p in ended) == list(PIDS)
    assert all(p.flags == 1 for p in ended)
    assert calls == []
