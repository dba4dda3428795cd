"""The direct protobuf encoder sends exactly what the OpenTelemetry SDK would have sent."""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.metrics.sdk_metrics import encode
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
)

RESOURCE = Resource.create({"service.name": "gpu-otel-agent", "host.name": "node-1"})


def _snapshot(power: float) -> NodeSnapshot:
    devices = []
    for index in range(3):
        identity = DeviceIdentity(f"GPU-{index}", index, "nvidia", "H100", f"0000:{index}:00.0")
        sample = GroupSample(
            "fast",
            (
                Reading("hw.gpu.utilization", 0.25 * index, (("hw.gpu.task", "general"),)),
                Reading("hw.power", power + index),
                Reading("hw.gpu.memory.usage", 1 << 33),  # int stays int
                Reading("hw.energy", 1234.5),
                Reading("gpu.clock.frequency", 1.98e9, (("gpu.clock.domain", "sm"),)),
                Reading("hw.temperature", float("nan"), (("hw.sensor_location", "gpu"),)),
            ),
            time_ns=1_000 + index,
        )
        device = DeviceSnapshot(identity, HealthState.OK, 10).with_sample(sample)
        if index == 2:
            device = device.with_health(HealthState.FAILED, "lost")
        devices.append(device)
    return NodeSnapshot(tuple(devices), taken_ns=5_000)


def test_direct_encoding_equals_the_sdk_encoding() -> None:
    snapshot = _snapshot(300.5)
    ours = ProtoEncoder(RESOURCE).encode(snapshot)
    sdk = encode_metrics(encode(snapshot, RESOURCE))
    assert ours == sdk
    assert ours.SerializeToString() == sdk.SerializeToString()


def test_cached_attributes_do_not_leak_between_exports() -> None:
    encoder = ProtoEncoder(RESOURCE)
    encoder.encode(_snapshot(100.0))
    second = _snapshot(200.0)
    assert encoder.encode(second) == encode_metrics(encode(second, RESOURCE))


def test_wire_encoded_points_equal_the_sdk_for_edge_values() -> None:
    # Data points are written in wire format (struct-packed): zero, negative, 64-bit
    # and fractional values, on gauges and on sums, must still match the SDK field for field.
    identity = DeviceIdentity("GPU-x", 0, "nvidia", "H100", "0000:00:00.0")
    values: tuple[float | int, ...] = (0, -5, (1 << 63) - 1, -(1 << 63), 0.0, -1.5, 1e300)
    readings = tuple(
        Reading(metric, value, (("case", str(index)),))
        for index, value in enumerate(values)
        for metric in ("hw.power", "hw.energy", "hw.errors")
    )
    device = DeviceSnapshot(identity, HealthState.OK, 0).with_sample(
        GroupSample("fast", readings, time_ns=(1 << 64) - 1))
    snapshot = NodeSnapshot((device,), taken_ns=7)
    ours = ProtoEncoder(RESOURCE).encode(snapshot)
    sdk = encode_metrics(encode(snapshot, RESOURCE))
    assert ours == sdk
    assert ours.SerializeToString() == sdk.SerializeToString()


def test_request_bytes_are_what_the_sdk_serialises() -> None:
    # encode_bytes writes the whole request by hand (metric headers, sums' temporality and
    # monotonicity, scope, resource): byte for byte the SDK's serialisation, gauges and sums.
    snapshot = _snapshot(42.0)
    sdk = encode_metrics(encode(snapshot, RESOURCE))
    assert ProtoEncoder(RESOURCE).encode_bytes(snapshot) == sdk.SerializeToString()
