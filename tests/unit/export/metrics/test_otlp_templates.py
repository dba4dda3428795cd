"""Runs of a sample whose shape the last one had are written by patching times and values
into bytes kept per shape (``series.ShapedRun``, ``otlp_proto._Template``); what goes out must
be, export after export, what the general path writes for the same snapshot.

The reference is a fresh ``ProtoEncoder`` with nothing kept in ``series`` either and no
sample given a shape (its per-sample tables emptied and ``_shape_of`` finding none, for that
one encoding), so every point of it is built as a ``SeriesPoint`` and packed one by one;
and, decoded with opentelemetry-proto's generated classes, the OpenTelemetry SDK's encoder
over the same snapshot (through the shaped runs, iterated as points). The snapshots are
random and change the way a node does: values (NaN, infinities, integers beyond 64 bits,
ints that become floats and back), readings appearing and going, equal attribute tuples that are new
objects, identity, workload attributes and health changes, counters restarting, devices
lost, device times given, missing or before the series' start.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from types import MappingProxyType

import pytest
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.metrics.series import ShapedRun, series_runs
from gpu_otel_agent.model.snapshot import (
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
from tests.unit.export.metrics.reference_exports import check_export, general_path
from tests.unit.export.metrics.series_end_points import Series

RESOURCE = Resource.create({"service.name": "gpu-otel-agent", "host.name": "node-1"})

# (metric, its own attributes): gauges and sums, double units and counts.
FAST: tuple[tuple[str, Attributes], ...] = (
    ("hw.power", ()),
    ("hw.energy", ()),
    ("hw.gpu.utilization", (("hw.gpu.task", "general"),)),
    ("hw.gpu.memory.usage", ()),
    ("hw.gpu.memory.limit", ()),
    ("gpu.clock.frequency", (("gpu.clock.domain", "sm"),)),
    ("hw.temperature", (("hw.sensor_location", "gpu"),)),
    ("hw.gpu.io", (("network.io.direction", "receive"),)),
    ("hw.gpu.io", (("network.io.direction", "transmit"),)),
    ("hw.gpu.utilization", (("hw.gpu.task", "encoder"),)),
    # Attribute values of every kind the encoder writes (a float and a bool too).
    ("gpu.nvlink.link.state", (("gpu.nvlink.link", 2.5), ("gpu.nvlink.active", True))),
)


def _value(rng: random.Random, as_int: bool) -> float | int:
    roll = rng.random()
    if roll < 0.03:
        return rng.choice((math.nan, math.inf, -math.inf))
    if roll < 0.05:
        return 1 << 64  # beyond what the wire carries: dropped, and counted
    if as_int:
        return rng.randrange(-(1 << 40), 1 << 40)
    return rng.uniform(-1e6, 1e6)


class _Device:
    """One GPU's state from export to export, changed at random."""

    def __init__(self, rng: random.Random, index: int) -> None:
        self.rng = rng
        self.identity = DeviceIdentity(f"GPU-{index}", index, "nvidia", "H100",
                                       f"0000:{index:02x}:00.0")
        self.start = 1_000 + index
        self.starts: MappingProxyType[tuple[str, Attributes], int] = MappingProxyType({})
        self.set = list(FAST)
        self.ints = {metric: rng.random() < 0.5 for metric, _ in FAST}
        self.own = {entry: entry[1] for entry in FAST}
        self.pids = [10, 11, 12]
        self.processes: GroupSample | None = None
        self.health = HealthState.OK

    def step(self, step: int) -> DeviceSnapshot:
        rng = self.rng
        if rng.random() < 0.1:  # the set of readings changes: one goes, comes, or moves
            self.set = rng.sample(list(FAST), rng.randrange(1, len(FAST) + 1))
        if rng.random() < 0.05:
            metric = rng.choice(FAST)[0]
            self.ints[metric] = not self.ints[metric]
        if rng.random() < 0.1:  # an equal tuple, a new object
            key = rng.choice(FAST)
            self.own[key] = tuple(list(self.own[key]))
        if rng.random() < 0.03:
            self.identity = DeviceIdentity(self.identity.uuid, self.identity.index, "nvidia",
                                           rng.choice(("H100", "H100 NVL")),
                                           self.identity.pci_bus_id)
        if rng.random() < 0.05:  # a counter restarts
            self.starts = MappingProxyType({**self.starts, ("hw.energy", ()): 5_000 + step})
        if rng.random() < 0.02:
            self.start += 1
        if rng.random() < 0.08:
            self.health = rng.choice(list(HealthState))
        times = rng.choice(("none", "all", "mixed"))
        base = 2_000 + step * 10
        readings = []
        for metric, own in self.set:
            at = 0 if times == "none" or (times == "mixed" and rng.random() < 0.5) \
                else rng.choice((base - 3, self.start - 1, base + 2))
            readings.append(Reading(metric, _value(rng, self.ints[metric]),
                                    self.own[(metric, own)], at))
        device = DeviceSnapshot(self.identity, HealthState.OK, self.start,
                                counter_starts=self.starts)
        device = device.with_sample(GroupSample("fast", tuple(readings), base))
        if self.processes is None or rng.random() < 0.3:
            if rng.random() < 0.3:
                self.pids = rng.sample(range(10, 20), rng.randrange(0, 4))
            self.processes = GroupSample("processes", tuple(
                Reading("gpu.process.memory.usage", _value(rng, True),
                        (("process.pid", pid), ("process.executable.name", "python")))
                for pid in self.pids), base + 1)
        return device.with_sample(self.processes)


def _snapshots(seed: int, exports: int) -> Iterator[NodeSnapshot]:
    rng = random.Random(seed)
    devices = [_Device(rng, 0), _Device(rng, 1)]
    extra: Attributes = ()
    for step in range(exports):
        if rng.random() < 0.05:
            extra = rng.choice(((), (("k8s.dra.driver", "gpu.nvidia.com"),)))
        present = [d for d in devices if rng.random() > 0.05]  # a GPU lost for an export
        snapshots = tuple(d.step(step) for d in present)
        health = {d.identity.uuid: DeviceHealth(
            d.health, status_readings(d.health),
            readings=(Reading("gpu.xid.errors", step // 7, (("gpu.xid.code", 79),)),)
            if d.health is not HealthState.OK else ()) for d in present}
        yield NodeSnapshot(snapshots, taken_ns=10_000 + step * 10,
                           health=MappingProxyType(health),
                           device_attributes=MappingProxyType(
                               {d.identity.uuid: extra for d in present} if extra else {}))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_patched_templates_send_what_a_fresh_encoding_sends(seed: int) -> None:
    kept = ProtoEncoder(RESOURCE)
    previous: set[Series] = set()
    shaped = runs = ended = 0
    for snapshot in _snapshots(seed, 150):
        grouped = series_runs(snapshot)
        shaped += sum(type(run) is ShapedRun for r in grouped.values() for run in r)
        runs += sum(map(len, grouped.values()))
        count, previous = check_export(kept, snapshot, previous, RESOURCE)
        ended += count
    # The snapshots did go the patched way (for a good part), and did end series.
    assert shaped * 3 > runs
    assert ended > 0


def test_the_sdk_path_reads_patched_runs_as_points() -> None:
    """/metrics and the SDK fallback iterate runs: a ShapedRun yields the points the general
    path builds for the same sample."""
    snapshots = list(_snapshots(7, 40))
    for snapshot in snapshots:
        runs = series_runs(snapshot)
        with general_path():
            reference = series_runs(snapshot)
        assert not any(type(run) is ShapedRun for r in reference.values() for run in r)
        assert {m: [list(run) for run in r] for m, r in runs.items()} == \
            {m: [list(run) for run in r] for m, r in reference.items()}
