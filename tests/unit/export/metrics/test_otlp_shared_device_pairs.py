"""A device's attribute pairs, which every series of its runs starts with, are encoded once
and shared by its processes' points (``ProtoEncoder._shared``): a process point's encoding
is that piece and its own pairs, not a copy of both (at 8 x 2,048, 280 of its 380 bytes).
The bytes sent stay the OpenTelemetry SDK's for the same snapshot, also where the pairs a run
starts with differ only in a value's type (True and 1, 0.0 and -0.0 are equal in Python and
encode differently)."""

from __future__ import annotations

import pytest
from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.metrics.sdk_metrics import encode
from gpu_otel_agent.model.snapshot import (
    AttributeValue,
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
)

RESOURCE = Resource.create({"service.name": "gpu-otel-agent", "host.name": "node-1"})
IDENTITIES = [DeviceIdentity(f"GPU-{i}", i, "nvidia", "H100", f"0000:{i:02x}:00.0")
              for i in range(2)]


def _snapshot(step: int, own: list[list[tuple[tuple[str, AttributeValue], ...]]]) -> NodeSnapshot:
    devices = []
    for identity, sets in zip(IDENTITIES, own, strict=True):
        readings = tuple(Reading("gpu.process.memory.usage", 4096 * n + step, attributes)
                         for n, attributes in enumerate(sets))
        devices.append(DeviceSnapshot(identity, HealthState.OK, 10)
                       .with_sample(GroupSample("fast", (Reading("hw.power", 1.0 + step),),
                                                1_000 + step))
                       .with_sample(GroupSample("processes", readings, 1_001 + step)))
    return NodeSnapshot(tuple(devices), taken_ns=5_000 + step)


def _processes(device: int, count: int) -> list[tuple[tuple[str, AttributeValue], ...]]:
    return [(("process.pid", 100 * device + n), ("process.executable.name", "python"))
            for n in range(count)]


def test_a_devices_processes_share_its_pairs() -> None:
    encoder = ProtoEncoder(RESOURCE)
    own = [_processes(0, 40), _processes(1, 40)]
    for step in range(3):  # a general encoding, then templates
        snapshot = _snapshot(step, own)
        sdk = encode_metrics(encode(snapshot, RESOURCE)).SerializeToString()
        assert encoder.encode_request(snapshot) == sdk
    for identity in IDENTITIES:
        pieces = [encoded for attributes, encoded in encoder._heads.items()
                  if ("hw.id", identity.uuid) in attributes
                  and any(key == "process.pid" for key, _ in attributes)]
        assert len(pieces) == 40
        device = pieces[0][0]
        assert device and all(common is device for common, _ in pieces)
        # The device's piece holds its pairs, each process's piece its own two.
        assert identity.uuid.encode() in device and b"process.pid" not in device
        assert all(b"process.pid" in own and identity.uuid.encode() not in own
                   for _, own in pieces)


@pytest.mark.parametrize("values", [(True, 1), (1, True), (0.0, -0.0), (1.5, 1.5), ("a", "a")])
def test_pairs_equal_in_python_but_not_on_the_wire_are_not_shared(
        values: tuple[AttributeValue, AttributeValue]) -> None:
    own = [[(("k", value), ("process.pid", n)) for n, value in enumerate(values)]
           for _ in IDENTITIES]
    encoder = ProtoEncoder(RESOURCE)
    for step in range(3):
        snapshot = _snapshot(step, own)
        sdk = encode_metrics(encode(snapshot, RESOURCE)).SerializeToString()
        assert encoder.encode_request(snapshot) == sdk
        assert ProtoEncoder(RESOURCE).encode_bytes(snapshot) == sdk
