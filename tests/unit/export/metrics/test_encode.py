from __future__ import annotations

from opentelemetry.sdk.metrics.export import Gauge, Sum
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.metrics.sdk_metrics import encode
from gpu_otel_agent.gpu_health.verdict import HealthBoard
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
    SnapshotStore,
)

IDENTITY = DeviceIdentity("GPU-1", 0, "nvidia", "H100", "00000000:18:00.0")


def _metrics(snapshot: NodeSnapshot) -> dict[str, object]:
    data = encode(snapshot, Resource.create({}))
    return {m.name: m for m in data.resource_metrics[0].scope_metrics[0].metrics}


def test_gauge_and_counter_types_and_attributes() -> None:
    sample = GroupSample(
        "fast",
        (
            Reading("hw.gpu.utilization", 0.37, (("hw.gpu.task", "general"),)),
            Reading("hw.energy", 12.5),
            Reading("gpu.clock.frequency", 1.98e9, (("gpu.clock.domain", "sm"),)),
        ),
        time_ns=123,
    )
    device = DeviceSnapshot(IDENTITY, HealthState.OK, 7).with_sample(sample)
    metrics = _metrics(NodeSnapshot((device,), 999))
    util = metrics["hw.gpu.utilization"]
    assert isinstance(util.data, Gauge)  # type: ignore[attr-defined]
    point = util.data.data_points[0]  # type: ignore[attr-defined]
    assert point.value == 0.37 and point.time_unix_nano == 123
    # hw.gpu.* list no hw.type in the conventions' model (hw.status, hw.errors, hw.power do).
    assert point.attributes["hw.id"] == "GPU-1" and "hw.type" not in point.attributes
    energy = metrics["hw.energy"].data  # type: ignore[attr-defined]
    assert isinstance(energy, Sum) and energy.is_monotonic
    assert energy.data_points[0].start_time_unix_nano == 7
    clock = metrics["gpu.clock.frequency"].data.data_points[0]  # type: ignore[attr-defined]
    assert "hw.type" not in clock.attributes  # hw.type only on hw.* metrics


def test_failed_device_reports_status_and_no_readings() -> None:
    sample = GroupSample("fast", (Reading("hw.power", 300.0),), time_ns=1)
    device = (
        DeviceSnapshot(IDENTITY, HealthState.OK, 0)
        .with_sample(sample)
        .with_health(HealthState.FAILED, "lost")
    )
    store = SnapshotStore()
    store.put(device)
    HealthBoard(store).reachability(IDENTITY.uuid, device.health, device.reason)  # the sampler
    metrics = _metrics(store.current(5))
    assert "hw.power" not in metrics
    status = metrics["hw.status"].data  # type: ignore[attr-defined]
    states = {p.attributes["hw.state"]: p.value for p in status.data_points}
    assert states == {"ok": 0, "degraded": 0, "failed": 1}
    assert not status.is_monotonic


def test_non_finite_values_are_absent() -> None:
    sample = GroupSample(
        "fast",
        (Reading("hw.power", float("nan")), Reading("hw.gpu.memory.utilization", float("inf")),
         Reading("hw.energy", 1.5)),
        time_ns=1,
    )
    device = DeviceSnapshot(IDENTITY, HealthState.OK, 0).with_sample(sample)
    metrics = _metrics(NodeSnapshot((device,), 5))
    assert "hw.power" not in metrics and "hw.gpu.memory.utilization" not in metrics
    assert "hw.energy" in metrics
