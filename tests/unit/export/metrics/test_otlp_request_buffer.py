"""The request is one buffer the encoder keeps and writes over in place (``encode_request``):
metrics of a template packed into it, others copied in, and a metric whose runs are the last
export's left as they are when its bytes are still at the same place. What it holds after
each export must be what a fresh encoder writes for the same snapshot (decoded with
opentelemetry-proto's generated classes; byte for byte when no series ended), over exports
that change the way a node does: a new fast sample each time, the processes group kept for a
few exports, refreshed with the same processes, with others (the request grows, shrinks, or
keeps its size with its metrics moved), or turned off and on by a reload (every process
series ends at once).
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence

import pytest
from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
)
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.metrics import otlp_proto
from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
)
from tests.unit.export.metrics.series_end_points import without_ends

RESOURCE = Resource.create({"service.name": "gpu-otel-agent", "host.name": "node-1"})
PROCESS_METRICS = ("gpu.process.memory.usage", "gpu.process.utilization")


def _fast(rng: random.Random, step: int) -> GroupSample:
    return GroupSample("fast", (Reading("hw.power", rng.uniform(50, 700)),
                                Reading("hw.energy", 10_000 + step * 7),
                                Reading("hw.gpu.utilization", rng.randrange(101),
                                        (("hw.gpu.task", "general"),))),
                       2_000 + step * 10)


def _processes(rng: random.Random, pids: list[int], step: int) -> GroupSample:
    return GroupSample("processes", tuple(
        Reading(metric, rng.randrange(1 << 30) if metric.endswith("usage")
                else rng.randrange(101),
                (("process.pid", pid), ("process.executable.name", f"python{pid % 3}")))
        for pid in pids for metric in PROCESS_METRICS), 2_001 + step * 10)


class _Node:
    def __init__(self, rng: random.Random, gpus: int) -> None:
        self.rng = rng
        # One snapshot per device, given new samples (as the store does): series.py keeps a
        # sample's runs while the device's identity and counter starts are the same objects.
        self.devices = [DeviceSnapshot(DeviceIdentity(f"GPU-{i}", i, "nvidia", "H100",
                                                      f"0000:{i:02x}:00.0"), HealthState.OK, 1_000)
                        for i in range(gpus)]
        self.pids = [list(range(100 * i, 100 * i + 5)) for i in range(gpus)]
        self.kept: list[GroupSample | None] = [None] * gpus
        self.processes_on = True

    def step(self, step: int) -> NodeSnapshot:
        rng = self.rng
        if rng.random() < 0.06:  # a reload turns the processes group off, or on again
            self.processes_on = not self.processes_on
        devices = []
        for i, base in enumerate(self.devices):
            device = base.with_sample(_fast(rng, step))
            roll = rng.random()
            if self.kept[i] is None or roll < 0.25:
                pids = self.pids[i]
                choice = rng.random()
                if choice < 0.3:  # one process more or fewer: the request's size moves
                    pids = sorted(rng.sample(range(100 * i, 100 * i + 9), rng.randrange(9)))
                elif choice < 0.45:  # as many digits: the same size, other attributes
                    pids = [pid + 90 if pid % 100 < 9 else pid for pid in pids]
                self.pids[i] = pids
                self.kept[i] = _processes(rng, pids, step)
            sample = self.kept[i]
            if self.processes_on and sample is not None:
                device = device.with_sample(sample)
            devices.append(device)
        return NodeSnapshot(tuple(devices), taken_ns=10_000 + step * 10)


def _exports(seed: int, count: int) -> Iterator[NodeSnapshot]:
    node = _Node(random.Random(seed), 3)
    for step in range(count):
        yield node.step(step)


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_kept_buffer_holds_what_a_fresh_encoder_writes(seed: int) -> None:
    kept = ProtoEncoder(RESOURCE)
    last: bytearray | None = None
    reused = resized = ended = 0
    for snapshot in _exports(seed, 120):
        request = kept.encode_request(snapshot)
        if last is not None:
            reused += request is last
            resized += request is not last
        last = request
        fresh_raw = ProtoEncoder(RESOURCE).encode_bytes(snapshot)
        ours, ends = without_ends(ExportMetricsServiceRequest.FromString(request))
        if not ends:
            assert request == fresh_raw
        assert ours == ExportMetricsServiceRequest.FromString(fresh_raw)
        ended += len(ends)
    # Both ways were taken: written in place over the last request, and a new buffer.
    assert reused > 20 and resized > 20
    assert ended > 0


def test_a_metric_unchanged_in_place_is_not_written_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """A new fast sample and the same processes sample: only the fast group's metrics (and
    the health status) are packed again, and the processes metrics' bytes from the last
    export are still right."""
    rng = random.Random(5)
    base = DeviceSnapshot(DeviceIdentity("GPU-0", 0, "nvidia", "H100", "0000:18:00.0"),
                          HealthState.OK, 1_000)
    processes = _processes(rng, list(range(100, 140)), 0)

    def snapshot(step: int) -> NodeSnapshot:
        device = base.with_sample(_fast(rng, step)).with_sample(processes)
        return NodeSnapshot((device,), taken_ns=10_000 + step * 10)

    encoder = ProtoEncoder(RESOURCE)
    encoder.encode_request(snapshot(0))
    encoder.encode_request(snapshot(1))  # every metric of a template from here on
    filled: list[int] = []
    real = otlp_proto._MetricTemplate.fill_into

    def counted(self: otlp_proto._MetricTemplate, request: bytearray, offset: int,
                runs: list[otlp_proto.Run]) -> None:
        filled.append(sum(map(len, runs)))
        real(self, request, offset, runs)

    monkeypatch.setattr(otlp_proto._MetricTemplate, "fill_into", counted)
    # A metric of the devices' samples alone is filled from their values, no runs made.
    picked = otlp_proto._MetricTemplate.fill_picked

    def counted_picked(self: otlp_proto._MetricTemplate, request: bytearray, offset: int,
                       times: Sequence[int], values: Sequence[float | int]) -> None:
        filled.append(len(values))
        picked(self, request, offset, times, values)

    monkeypatch.setattr(otlp_proto._MetricTemplate, "fill_picked", counted_picked)
    third = snapshot(2)
    request = encoder.encode_request(third)
    # The fast metrics' point and hw.status's (the export's own), not the 40 processes'.
    assert filled and max(filled) < 40
    assert len(filled) < len(ExportMetricsServiceRequest.FromString(request)
                             .resource_metrics[0].scope_metrics[0].metrics)
    assert request == ProtoEncoder(RESOURCE).encode_bytes(third)
