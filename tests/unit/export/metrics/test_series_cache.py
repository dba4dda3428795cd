"""Points of a sample are kept between exports, but never outlive what they were built from."""

from __future__ import annotations

import random
from types import MappingProxyType

from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.metrics import series as series_module
from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.metrics.series import _series_attributes, series, series_runs
from gpu_otel_agent.model.snapshot import (
    Attributes,
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
)


def _device() -> DeviceSnapshot:
    identity = DeviceIdentity("GPU-0", 0, "nvidia", "H100", "0000:01:00.0")
    slow = GroupSample("slow", (Reading("hw.energy", 10.0), Reading("hw.power", 300.0)), 50)
    return DeviceSnapshot(identity, HealthState.OK, 7).with_sample(slow)


def _points(snapshot: NodeSnapshot, metric: str) -> list[tuple[int, int, float]]:
    return [(p.start_time_ns, p.time_ns, float(p.value)) for p in series(snapshot)[metric]]


def test_an_unchanged_sample_gives_the_same_points_and_a_new_one_its_own() -> None:
    device = _device()
    first = series(NodeSnapshot((device,), taken_ns=100))
    second = series(NodeSnapshot((device,), taken_ns=200))
    assert first["hw.energy"] == second["hw.energy"]
    # hw.status is the export's own (its time is the snapshot's), never kept.
    assert {p.time_ns for p in second["hw.status"]} == {200}
    fresh = device.with_sample(GroupSample("slow", (Reading("hw.energy", 11.0),), 60))
    assert _points(NodeSnapshot((fresh,), taken_ns=300), "hw.energy") == [(7, 60, 11.0)]


def test_a_counter_restart_reaches_points_of_a_sample_already_exported() -> None:
    device = _device()
    assert _points(NodeSnapshot((device,), 100), "hw.energy") == [(7, 50, 10.0)]
    restarted = DeviceSnapshot(device.identity, device.health, device.start_time_ns,
                               device.samples, counter_starts=MappingProxyType(
                                   {("hw.energy", ()): 42}))
    assert _points(NodeSnapshot((restarted,), 200), "hw.energy") == [(42, 50, 10.0)]
    assert _points(NodeSnapshot((device,), 300), "hw.energy") == [(7, 50, 10.0)]


def test_runs_of_an_unchanged_sample_are_the_same_lists_and_their_bytes_the_same() -> None:
    """The OTLP encoder keeps a run's bytes while the run is the same list: what it sends
    after a sample changed, or stayed, must equal what a fresh encoder writes for it."""
    device = _device()
    fast = GroupSample("fast", (Reading("hw.gpu.utilization", 0.5),), 60)
    device = device.with_sample(fast)
    first = series_runs(NodeSnapshot((device,), taken_ns=100))
    second = series_runs(NodeSnapshot((device,), taken_ns=200))
    assert first["hw.energy"][0] is second["hw.energy"][0]  # kept: the same list
    assert first["hw.status"][0] is not second["hw.status"][0]  # the export's own

    resource = Resource.create({"service.name": "test"})
    kept = ProtoEncoder(resource)
    moved = device.with_sample(GroupSample("fast", (Reading("hw.gpu.utilization", 0.7),), 70))
    for snapshot in (NodeSnapshot((device,), taken_ns=100), NodeSnapshot((device,), 200),
                     NodeSnapshot((moved,), 300), NodeSnapshot((moved,), 400)):
        assert kept.encode_bytes(snapshot) == ProtoEncoder(resource).encode_bytes(snapshot)
    last = kept.encode(NodeSnapshot((moved,), 500))
    values = {m.name: [p.as_double for p in m.gauge.data_points]
              for m in last.resource_metrics[0].scope_metrics[0].metrics if m.HasField("gauge")}
    assert values["hw.gpu.utilization"] == [0.7]
    assert values["hw.power"] == [300.0]


def test_a_point_is_dated_when_the_device_took_its_value() -> None:
    """A reading that carries the device's own time (an NVML field timestamp) is dated by it,
    never before its series' start; one without is dated at the group's read."""
    identity = DeviceIdentity("GPU-9", 9, "nvidia", "H100", "0000:09:00.0")
    sample = GroupSample("fast", (Reading("hw.power", 300.0, (), 40),
                                  Reading("hw.energy", 10.0, (), 3),
                                  Reading("hw.gpu.utilization", 0.5)), 50)
    device = DeviceSnapshot(identity, HealthState.OK, 7).with_sample(sample)
    snapshot = NodeSnapshot((device,), taken_ns=100)
    assert _points(snapshot, "hw.power") == [(7, 40, 300.0)]
    assert _points(snapshot, "hw.energy") == [(7, 7, 10.0)]  # cached since before the start
    assert _points(snapshot, "hw.gpu.utilization") == [(7, 50, 0.5)]


def test_series_attributes_follow_the_own_tuple_object_over_random_samples() -> None:
    """A series' whole attribute tuple is kept while its reading's own tuple is the same
    object, and is built anew for an equal tuple that is another object; its value is always
    the device's attributes then the own ones (ids of dropped own tuples get reused)."""
    rng = random.Random(41)
    device = _device()
    metric = "gpu.process.utilization"
    owns: list[Attributes] = [(("process.pid", pid), ("hw.gpu.task", "sm")) for pid in range(30)]
    last: dict[int, Attributes] = {}  # pid -> its series' attributes in the last sample
    rebuilt = kept = 0
    for step in range(300):
        remade = set(rng.sample(range(len(owns)), 5))
        for at in remade:  # equal, another object (the old one is dropped: its id free)
            owns[at] = tuple(list(owns[at]))
        chosen = rng.sample(range(len(owns)), rng.randrange(1, len(owns)))
        readings = tuple(Reading(metric, float(step), owns[at]) for at in chosen)
        sample = GroupSample("processes", (*readings, Reading("hw.power", 1.0 + step)),
                             100 + step)
        runs = series_runs(NodeSnapshot((device.with_sample(sample),), taken_ns=200 + step))
        points = [p for run in runs[metric] for p in run]
        got: dict[int, Attributes] = {}
        for at, point in zip(chosen, points, strict=True):
            assert point.attributes == _series_attributes(device, metric, owns[at], ())
            if at in last and at not in remade:  # the same object as in the last sample
                assert point.attributes is last[at]
                kept += 1
            elif at in last:
                assert point.attributes is not last[at]
                rebuilt += 1
            got[at] = point.attributes
        last = got
        del readings, sample, runs, points
        if step % 3 == 0:
            # As past MAX_KEPT: the kept samples (and their readings) go, the attribute
            # cache stays, and must not take another tuple with a reused id for its own.
            series_module._latest.clear()
    assert kept > 1000 and rebuilt > 100
