"""An export of the last one's layout (``series.SeriesLayout``: every sample's runs of the
same shapes, or the same lists, as then, and no series ended last time) only fills the
metrics of the samples with new runs into the kept request (``ProtoEncoder._refill``): no
per-metric planning or shape comparisons, no metric of an unchanged sample. What goes out must be,
export after export, what a fresh encoder on the general path and the OpenTelemetry SDK's
encoder send for the same snapshot.

The snapshots are a node in its steady state, changed now and then as a node changes: the
fast group a new sample every export (values moving, now and then NaN or a reading more or
less), the slow group kept for many exports, the processes group replaced every few
(processes starting and exiting), health states and the health engine's readings changing
(new values, the same reading objects between), GPUs lost for an export, the processes group
switched off and on (a reload ending every process series), self-telemetry new every export
(its start moving at a reload), node plugins' samples (kept, replaced, one without
readings), and a slow sample with a dropped reading whose runs are lists beside the fast
group's shaped runs of the same metric (a metric with no template: written from chunks).
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator, Sequence
from types import MappingProxyType
from unittest.mock import patch

import pytest
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.metrics import otlp_proto
from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder, _MetricTemplate
from gpu_otel_agent.export.metrics.series import SampleRuns, SeriesLayout
from gpu_otel_agent.model.snapshot import (
    AgentSample,
    Attributes,
    DeviceHealth,
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
    status_readings,
)
from tests.unit.export.metrics.reference_exports import check_export
from tests.unit.export.metrics.series_end_points import Series

RESOURCE = Resource.create({"service.name": "gpu-otel-agent", "host.name": "node-1"})

FAST: tuple[tuple[str, Attributes, bool], ...] = (  # metric, own attributes, int values
    ("hw.power", (), False),
    ("hw.energy", (), True),
    ("hw.gpu.utilization", (("hw.gpu.task", "general"),), False),
    ("hw.gpu.memory.usage", (), True),
    ("hw.temperature", (("hw.sensor_location", "gpu"),), True),
    ("gpu.clock.frequency", (("gpu.clock.domain", "sm"),), False),
)
MEMORY_SENSOR: Attributes = (("hw.sensor_location", "memory"),)
XID: Attributes = (("gpu.xid.code", 79),)


class _Device:
    def __init__(self, rng: random.Random, index: int) -> None:
        self.rng = rng
        self.identity = DeviceIdentity(f"GPU-{index}", index, "nvidia", "H100",
                                       f"0000:{index:02x}:00.0")
        # The device as the store keeps it (its counter starts the same object throughout).
        self.device = DeviceSnapshot(self.identity, HealthState.OK, 1_000)
        self.fast = list(FAST)
        self.slow: GroupSample | None = None
        self.processes: GroupSample | None = None
        self.pids = [100 + index, 200 + index]
        self.state = HealthState.OK
        self.xid: tuple[Reading, ...] = ()

    def _value(self, as_int: bool) -> float | int:
        if self.rng.random() < 0.003:
            return math.nan  # dropped: the sample goes the general way
        return self.rng.randrange(0, 1 << 40) if as_int else self.rng.uniform(0, 1e4)

    def step(self, step: int, processes_on: bool) -> DeviceSnapshot:
        rng = self.rng
        if rng.random() < 0.02:  # a reading more or less
            self.fast = rng.sample(list(FAST), rng.randrange(len(FAST) - 1, len(FAST) + 1))
        base = 2_000 + step * 10
        device = self.device.with_sample(GroupSample("fast", tuple(
            Reading(metric, self._value(as_int), own) for metric, own, as_int in self.fast),
            base))
        if self.slow is None or rng.random() < 0.05:
            # Now and then a reading the wire cannot carry: the sample's runs are lists,
            # hw.temperature's beside the fast group's shaped run (no metric template).
            limit = math.nan if rng.random() < 0.3 else rng.uniform(100, 700)
            self.slow = GroupSample("slow", (
                Reading("gpu.power.limit", limit),
                Reading("hw.temperature", rng.randrange(30, 90), MEMORY_SENSOR)), base)
        device = device.with_sample(self.slow)
        if processes_on:
            if self.processes is None or step % 5 == 0:
                if rng.random() < 0.2:  # processes start and exit
                    self.pids = rng.sample(range(100, 110), rng.randrange(0, 4))
                self.processes = GroupSample("processes", tuple(
                    Reading("gpu.process.memory.usage", rng.randrange(0, 1 << 30),
                            (("process.pid", pid),)) for pid in self.pids), base + 1)
            device = device.with_sample(self.processes)
        return device

    def health(self, step: int) -> DeviceHealth:
        rng = self.rng
        if rng.random() < 0.03:
            self.state = rng.choice(list(HealthState))
        if self.state is HealthState.OK:
            self.xid = ()
        elif not self.xid or rng.random() < 0.3:  # a new count; else the same readings
            self.xid = (Reading("gpu.xid.errors", step // 3, XID),)
        return DeviceHealth(self.state, status_readings(self.state), readings=self.xid)


def _snapshots(seed: int, exports: int) -> Iterator[NodeSnapshot]:
    rng = random.Random(seed)
    devices = [_Device(rng, i) for i in range(3)]
    processes_on = True
    agent_start = 500
    node: tuple[AgentSample, ...] = ()
    for step in range(exports):
        if rng.random() < 0.05:  # a node plugin's samples: one, two, or one with no readings
            node = tuple(AgentSample(tuple(
                Reading("gpu_agent.ebpf.process.count", rng.randrange(0, 40))
                for _ in range(rng.randrange(0, 2))), 400, 10_000 + step * 10)
                for _ in range(rng.randrange(1, 3)))
        if rng.random() < 0.02:  # a reload: processes off or on, the agent's start anew
            processes_on = not processes_on
            agent_start = 500 + step
        present = [d for d in devices if rng.random() > 0.01]  # a GPU lost for an export
        agent = AgentSample((
            Reading("gpu_agent.exports.completed", step),
            Reading("gpu_agent.exports.failed", step // 7),
            *(Reading("gpu_agent.cycle.time", step * 0.01 + d.identity.index,
                      (("hw.id", d.identity.uuid),)) for d in present)),
            agent_start, 10_000 + step * 10)
        yield NodeSnapshot(tuple(d.step(step, processes_on) for d in present),
                           taken_ns=10_000 + step * 10,
                           health=MappingProxyType({d.identity.uuid: d.health(step)
                                                    for d in present}),
                           agent=agent, node=node)


@pytest.mark.parametrize("joined_points", [otlp_proto._JOINED_POINTS, 0])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_exports_of_the_same_layout_send_what_a_fresh_encoding_sends(
        seed: int, joined_points: int, monkeypatch: pytest.MonkeyPatch) -> None:
    # 0: every metric filled as one of many points is (from each sample's own picker).
    monkeypatch.setattr(otlp_proto, "_JOINED_POINTS", joined_points)
    kept = ProtoEncoder(RESOURCE)
    # A second destination's encoder: the layout is shared, each encoder keeps its own.
    other = ProtoEncoder(RESOURCE)
    refills: list[bool] = []  # per refill of ``kept``: a metric in it has no template
    # Per refill of ``kept``: its metrics filled straight from the samples' values, and
    # whether the new device samples' runs were left unbuilt (no ShapedRun made for them).
    direct: list[tuple[int, bool]] = []
    refill = ProtoEncoder._refill
    fill_picked = _MetricTemplate.fill_picked
    picked: list[int] = []

    def counted(encoder: ProtoEncoder, request: bytearray, slots: list[SampleRuns],
                layout: SeriesLayout) -> None:
        if encoder is kept:
            refills.append(any(whole is None for whole, _, _ in encoder._plan))
            new = [slot for slot, last in zip(slots, encoder._slots, strict=True)
                   if slot is not last and slot.shape is not None]
            picked.clear()
        refill(encoder, request, slots, layout)
        if encoder is kept:
            direct.append((len(picked), all(slot._runs is None for slot in new)))

    def counted_picked(template: _MetricTemplate, request: bytearray, offset: int,
                       times: Sequence[int], values: Sequence[float | int]) -> None:
        picked.append(len(values))
        fill_picked(template, request, offset, times, values)

    previous: set[Series] = set()
    ended = exports = 0
    with patch.object(ProtoEncoder, "_refill", counted), \
            patch.object(_MetricTemplate, "fill_picked", counted_picked):
        for snapshot in _snapshots(seed, 300):
            count, previous = check_export(kept, snapshot, previous, RESOURCE)
            assert kept._request is not None  # the request it just returned
            assert other.encode_bytes(snapshot) == bytes(kept._request)
            ended += count
            exports += 1
    # The kept path was taken for most exports, some with a metric written from chunks,
    # and series did end.
    assert len(refills) * 2 > exports
    # Most refills filled metrics from the samples' values directly, and none built the new
    # device samples' runs (the SDK path builds them later, when it asks).
    assert sum(1 for count, _ in direct if count) * 2 > len(direct)
    assert all(unbuilt for _, unbuilt in direct)
    assert True in refills and False in refills
    assert ended > 0
