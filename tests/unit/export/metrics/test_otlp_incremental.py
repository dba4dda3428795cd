"""An encoder that keeps each series' encoded attributes between exports sends, export after
export, what a full encoding of that snapshot sends.

``series.py`` hands the encoder the same attribute tuple for a series while its device's
identity and workload attributes hold, and the encoder copies a metric whose runs are all the
last export's whole. The references: a fresh ``ProtoEncoder`` per export (nothing kept), and,
independently, the request decoded by opentelemetry-proto's generated classes compared with
what the OpenTelemetry SDK's encoder builds from the same snapshot.
"""

from __future__ import annotations

from opentelemetry.exporter.otlp.proto.common.metrics_encoder import encode_metrics
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.metrics.sdk_metrics import encode
from gpu_otel_agent.model.snapshot import (
    Attributes,
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
)
from tests.unit.export.metrics.series_end_points import without_ends

RESOURCE = Resource.create({"service.name": "gpu-otel-agent", "host.name": "node-1"})
IDENTITY = DeviceIdentity("GPU-0", 0, "nvidia", "H100", "0000:18:00.0")
RENAMED = DeviceIdentity("GPU-0", 0, "nvidia", "H100 NVL", "0000:18:00.0")


def _fast(step: int, *, pids: tuple[int, ...] = (10, 11)) -> tuple[Reading, ...]:
    return (
        Reading("hw.power", 300.0 + step),
        Reading("hw.gpu.utilization", step / 10, (("hw.gpu.task", "general"),)),
        Reading("hw.energy", 1000 + step),  # a counter: start time and is_monotonic
        Reading("hw.gpu.memory.usage", (1 << 33) + step),  # int stays int
        Reading("gpu.clock.frequency", 1.98e9, (("gpu.clock.domain", "sm"),)),
        *(Reading("gpu.process.memory.usage", pid * 1024 + step,
                  (("process.pid", pid), ("process.executable.name", "python")))
          for pid in pids),
    )


def _snapshots() -> list[NodeSnapshot]:
    """Exports in which values move, series come and go, and the identity and the workload
    source's attributes change (each must reach the wire, not a kept tuple's bytes)."""
    out = []
    device = DeviceSnapshot(IDENTITY, HealthState.OK, 10)
    extra: Attributes = ()
    for step in range(12):
        pids = (10, 11) if step < 4 else (10, 12, 13) if step < 8 else ()
        if step == 6:
            device = DeviceSnapshot(RENAMED, HealthState.OK, 10, device.samples)
        if step == 9:
            extra = (("k8s.dra.driver", "gpu.nvidia.com"),)
        device = device.with_sample(GroupSample("fast", _fast(step, pids=pids), 1_000 + step))
        if step % 5 == 0:
            device = device.with_sample(GroupSample(
                "slow", (Reading("gpu.power.limit", 700.0 - step),), 500 + step))
        attributes = {IDENTITY.uuid: extra} if extra else {}
        out.append(NodeSnapshot((device,), taken_ns=5_000 + step,
                                device_attributes=attributes))
    return out




def _series(request: ExportMetricsServiceRequest) -> set[tuple[str, frozenset[tuple[str, str]]]]:
    return {(m.name, frozenset((a.key, str(a.value)) for a in p.attributes))
            for r in request.resource_metrics for s in r.scope_metrics for m in s.metrics
            for p in (m.gauge.data_points if m.HasField("gauge") else m.sum.data_points)}


def test_kept_attributes_encode_as_a_full_encoding_does() -> None:
    kept = ProtoEncoder(RESOURCE)
    previous: set[tuple[str, frozenset[tuple[str, str]]]] = set()
    all_ends = []
    for snapshot in _snapshots():
        raw = kept.encode_bytes(snapshot)
        fresh_raw = ProtoEncoder(RESOURCE).encode_bytes(snapshot)
        ours, ends = without_ends(ExportMetricsServiceRequest.FromString(raw))
        fresh = ExportMetricsServiceRequest.FromString(fresh_raw)
        if not ends:
            assert raw == fresh_raw
        all_ends += ends
        assert ours == fresh
        assert ours == encode_metrics(encode(snapshot, RESOURCE))
        # Each end is of a series the last export sent and this one does not.
        now = _series(fresh)
        assert all(end in previous and end not in now for end in ends), ends
        previous = now
    assert all_ends  # the snapshots do end series (a process leaves), so the check ran


def test_a_series_keeps_its_attribute_tuple_while_its_device_holds() -> None:
    from gpu_otel_agent.export.metrics.series import series

    first, second = _snapshots()[1:3]
    clock = series(first)["gpu.clock.frequency"][0].attributes
    again = series(second)["gpu.clock.frequency"][0].attributes
    assert again is clock  # the same object: what is kept by it (labels) is reused
    renamed = series(_snapshots()[6])["gpu.clock.frequency"][0].attributes
    assert renamed is not clock and ("hw.model", "H100 NVL") in renamed

