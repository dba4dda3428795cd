"""A series the agent stops sending ends, over OTLP, with one point flagged "no recorded
value" (metrics.proto DataPointFlags): what Prometheus's OTLP translator stores as a staleness
marker, as a scrape would see the series missing."""

from __future__ import annotations

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
)

RESOURCE = Resource.create({"service.name": "gpu-otel-agent", "host.name": "node-1"})
NO_VALUE = metrics_pb2.DataPointFlags.DATA_POINT_FLAGS_NO_RECORDED_VALUE_MASK


def _snapshot(taken_ns: int, lost: bool = False, clocks: bool = True) -> NodeSnapshot:
    """Two GPUs; GPU-1 lost: its readings withdrawn but its health."""
    devices = []
    for index in range(2):
        identity = DeviceIdentity(f"GPU-{index}", index, "nvidia", "H100", f"0000:{index}:00.0")
        readings = [] if lost and index == 1 else [
            Reading("hw.power", 300.0 + index), Reading("hw.energy", 1234.5 + index)]
        if clocks:
            readings.append(Reading("gpu.clock.frequency", 1.98e9, (("gpu.clock.domain", "sm"),)))
        sample = GroupSample("fast", tuple(readings), time_ns=taken_ns - 10)
        device = DeviceSnapshot(identity, HealthState.OK, 10).with_sample(sample)
        if lost and index == 1:
            device = device.with_health(HealthState.FAILED, "lost")
        devices.append(device)
    return NodeSnapshot(tuple(devices), taken_ns=taken_ns)


def _points(request: ExportMetricsServiceRequest, name: str) -> list[metrics_pb2.NumberDataPoint]:
    for metric in request.resource_metrics[0].scope_metrics[0].metrics:
        if metric.name == name:
            data = metric.gauge if metric.HasField("gauge") else metric.sum
            return list(data.data_points)
    return []


def _hw_id(point: metrics_pb2.NumberDataPoint) -> str:
    return next(a.value.string_value for a in point.attributes if a.key == "hw.id")


def test_a_withdrawn_series_ends_with_one_flagged_point_without_a_value() -> None:
    encoder = ProtoEncoder(RESOURCE)
    first = encoder.encode(_snapshot(5_000))
    assert all(p.flags == 0 for m in ("hw.power", "hw.energy")
               for p in _points(first, m))
    before = {_hw_id(p): p for p in _points(first, "hw.energy")}
    second = encoder.encode(_snapshot(6_000, lost=True))
    for name in ("hw.power", "hw.energy"):  # a gauge and a counter
        ended = [p for p in _points(second, name) if p.flags & NO_VALUE]
        assert [_hw_id(p) for p in ended] == ["GPU-1"], name
        (end,) = ended
        assert end.WhichOneof("value") is None
        assert end.time_unix_nano == 6_000
        live = [p for p in _points(second, name) if not p.flags]
        assert [_hw_id(p) for p in live] == ["GPU-0"]
        previous = next(p for p in _points(first, name) if _hw_id(p) == "GPU-1")
        assert list(end.attributes) == list(previous.attributes)
    energy_end = next(p for p in _points(second, "hw.energy") if p.flags)
    assert energy_end.start_time_unix_nano == before["GPU-1"].start_time_unix_nano
    # Said once: the next export without the series carries no end of it.
    third = encoder.encode(_snapshot(7_000, lost=True))
    assert not [p for m in ("hw.power", "hw.energy") for p in _points(third, m) if p.flags]
    # Back: an ordinary point again.
    fourth = encoder.encode(_snapshot(8_000))
    assert {_hw_id(p) for p in _points(fourth, "hw.power") if not p.flags} == {"GPU-0", "GPU-1"}


def test_a_metric_whose_every_series_ended_is_sent_with_its_ends_only() -> None:
    encoder = ProtoEncoder(RESOURCE)
    encoder.encode(_snapshot(5_000))
    request = encoder.encode(_snapshot(6_000, clocks=False))
    ended = _points(request, "gpu.clock.frequency")
    assert sorted(_hw_id(p) for p in ended) == ["GPU-0", "GPU-1"]
    assert all(p.flags == NO_VALUE and p.WhichOneof("value") is None for p in ended)
    # Written as the protobuf runtime writes the same message (field order included).
    encoder = ProtoEncoder(RESOURCE)
    encoder.encode_bytes(_snapshot(5_000))
    written = encoder.encode_bytes(_snapshot(6_000, lost=True, clocks=False))
    assert ExportMetricsServiceRequest.FromString(written).SerializeToString() == written
