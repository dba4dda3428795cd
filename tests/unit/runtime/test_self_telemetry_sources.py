"""The agent's own sources hand self-telemetry their values without a ``Reading`` each
(``ValuesSource``: the export counters, reliability, the health pipeline). Sample after
sample, over counters that move, throttling codes, endpoints, restarted threads and refusal
codes that come and go, each must give what its readings function gives (``export_readings``,
``reliability_readings``, ``HealthRuntime.readings``: the old path), and a self-telemetry of
the values sources must sample, build readings and send what one of the readings sources
does, with the same keys object handed on while nothing changes shape.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable
from dataclasses import replace
from types import SimpleNamespace
from typing import Any, cast

import pytest
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.events.dead_letter import DeadLetterStats
from gpu_otel_agent.export.events.pusher import EventExportStats
from gpu_otel_agent.export.events.spool import SpoolStats
from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.metrics.pusher import ExportStats
from gpu_otel_agent.export.otlp.throttle import ThrottleGate
from gpu_otel_agent.gpu_health.engine import HealthStats
from gpu_otel_agent.model.snapshot import DeviceIdentity, NodeSnapshot, Reading
from gpu_otel_agent.runtime import reliability
from gpu_otel_agent.runtime.health_pipeline import HealthRuntime, HealthValues
from gpu_otel_agent.runtime.reliability import ReliabilityValues, reliability_readings
from gpu_otel_agent.runtime.self_telemetry import (
    ExportValues,
    SelfTelemetry,
    ValuesSource,
    export_readings,
    library_call_readings,
    library_error_readings,
    sampler_readings,
)
from gpu_otel_agent.sampling.sampler import DeviceSampler
from tests.unit.export.metrics.reference_exports import check_export
from tests.unit.export.metrics.series_end_points import Series
from tests.unit.runtime.self_telemetry_doubles import FakeDevice, FakeSampler, FakeSnapshot

RESOURCE = Resource.create({"service.name": "gpu-otel-agent", "host.name": "node-1"})
ENDPOINTS = ("collector-a:4317", "collector-b:4317", "collector-c:4318")
CODES = ("RESOURCE_EXHAUSTED", "UNAVAILABLE", "429", "503")
THREADS = ("otlp-export", "events-export", "gpu-3", "netlink")


def _written(triples: list[tuple[str, object, tuple[object, ...]]]) -> list[tuple[object, ...]]:
    """What the wire carries of each: metric, value with its type and sign, attributes."""
    return [(metric, repr(value), type(value), attributes)
            for metric, value, attributes in triples]


def _of(readings: tuple[Reading, ...]) -> list[tuple[object, ...]]:
    return _written([(r.metric, r.value, r.attributes) for r in readings])


def _read(source: ValuesSource) -> tuple[Hashable, list[tuple[object, ...]]]:
    values: list[float | int] = []
    token = source.read(values)
    return token, _written([(metric, value, attributes) for (metric, attributes), value
                            in zip(source.keys(token), values, strict=True)])


class _Node:
    """The counters the sources read, stepped at random: the export stats, the throttling
    gates (on a clock that stands still between a step's reads), dropped readings, thread
    restarts and the health pipeline's engine, event pusher, spool and quarantine."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.now = 100.0
        self.exports = ExportStats()
        self.gates: dict[str, ThrottleGate] = {}
        self.dropped = 0
        self.restarts: dict[str, int] = {}
        self.engine = SimpleNamespace(stats=HealthStats(), delivered=0)
        self.pusher = SimpleNamespace(stats=EventExportStats(),
                                      dead_letters=SimpleNamespace(stats=DeadLetterStats()))
        self.spool = SimpleNamespace(stats=SpoolStats())
        # HealthRuntime's own methods read these parts of it.
        self.health = cast(HealthRuntime, SimpleNamespace(
            engine=self.engine, pusher=self.pusher, spool=self.spool))
        self.health.telemetry = lambda: HealthRuntime.telemetry(self.health)  # type: ignore[method-assign]

    def health_readings(self) -> tuple[Reading, ...]:
        """``HealthRuntime.readings`` of these counters (the old path)."""
        return HealthRuntime.readings(self.health)

    def step(self) -> None:
        rng = self.rng
        self.now += rng.uniform(0, 2)
        stats = self.exports
        stats.exports += rng.randrange(0, 2)
        stats.failures += rng.random() < 0.1
        stats.skipped += rng.random() < 0.05
        if rng.random() < 0.1:  # an endpoint first throttled, or a reload that drops one
            endpoint = rng.choice(ENDPOINTS)
            if endpoint in self.gates and rng.random() < 0.3:
                del self.gates[endpoint]
            else:
                self.gates.setdefault(endpoint, ThrottleGate(clock=lambda: self.now))
        for gate in self.gates.values():
            if rng.random() < 0.2:
                gate.hold(rng.choice((0.0, rng.uniform(0, 5))), rng.choice(CODES))
            if rng.random() < 0.1:
                gate.stats.held += 1
        self.dropped += rng.random() < 0.05
        if rng.random() < 0.05:
            name = rng.choice(THREADS)
            self.restarts[name] = self.restarts.get(name, 0) + 1
        engine, pusher, spool = self.engine, self.pusher.stats, self.spool.stats
        engine.delivered += rng.randrange(0, 3)
        engine.stats.suppressed += rng.random() < 0.1
        engine.stats.duplicates += rng.random() < 0.1
        pusher.sent += rng.randrange(0, 3)
        pusher.dropped += rng.random() < 0.02
        spool.dropped += rng.random() < 0.02
        spool.spooled += rng.randrange(0, 2)
        spool.records = rng.randrange(0, 50)
        spool.bytes = spool.records * rng.randrange(100, 400)
        spool.errors += rng.random() < 0.02
        if rng.random() < 0.05:
            quarantined = self.pusher.dead_letters.stats.quarantined
            code = rng.choice(CODES)
            quarantined[code] = quarantined.get(code, 0) + 1

    def patch(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Reliability's module-wide registries, as this node has them."""
        monkeypatch.setattr(reliability, "gates", lambda: dict(self.gates))
        monkeypatch.setattr(reliability, "dropped_readings", lambda: self.dropped)
        monkeypatch.setattr(reliability, "restarts", lambda: dict(self.restarts))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_each_values_source_gives_what_its_readings_give(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    node = _Node(random.Random(seed))
    node.patch(monkeypatch)
    pairs: list[tuple[ValuesSource, Callable[[], tuple[Reading, ...]]]] = [
        (ExportValues(node.exports), lambda: export_readings(node.exports)),
        (ReliabilityValues(), reliability_readings),
        (HealthValues(node.health), node.health_readings),
    ]
    shapes: set[object] = set()
    for _ in range(300):
        node.step()
        for values, readings in pairs:
            token, ours = _read(values)
            assert ours == _of(readings())
            shapes.add(token)
    assert len(shapes) > 10  # endpoints, codes and threads came and went


@pytest.mark.parametrize("seed", [4, 5])
def test_a_sample_of_values_sources_is_the_sample_of_their_readings(
        seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    node = _Node(rng)
    node.patch(monkeypatch)
    plugin: list[Reading] = []  # a node plugin's readings, between the values sources

    def plugin_readings() -> tuple[Reading, ...]:
        return tuple(plugin)

    old, new = SelfTelemetry(7), SelfTelemetry(7)
    old.add(lambda: export_readings(node.exports))
    new.add(ExportValues(node.exports))
    for telemetry in (old, new):
        telemetry.add(plugin_readings)
    old.add(reliability_readings)
    new.add(ReliabilityValues())
    old.add(node.health_readings)
    new.add(HealthValues(node.health))
    kept = ProtoEncoder(RESOURCE)
    previous: set[Series] = set()
    last_keys: Any = None
    handed_on = ended = 0
    for step in range(200):
        node.step()
        if rng.random() < 0.1:
            plugin[:] = [Reading("gpu_agent.ebpf.events.lost", rng.randrange(5), (("k", v),))
                         for v in rng.sample("abc", rng.randrange(0, 3))]
        before, after = old.sample(1_000 + step), new.sample(1_000 + step)
        assert before.keys is not None and before.values is not None
        assert after.keys is not None and after.values is not None
        ours = _written(list(zip(after.keys.metrics, after.values, after.keys.attributes,
                                 strict=True)))
        assert ours == _written(list(zip(before.keys.metrics, before.values,
                                         before.keys.attributes, strict=True)))
        handed_on += after.keys is last_keys
        last_keys = after.keys
        count, previous = check_export(kept, NodeSnapshot((), 2_000 + step, agent=after),
                                       previous, RESOURCE)
        ended += count
        # Looked at, the readings are the old path's, in order, its own objects included.
        assert _of(after.readings) == _of(before.readings) == ours
        assert after == before
    assert handed_on > 60 and ended > 0


def test_a_samplers_part_is_sampler_readings_as_groups_come_and_identities_change() -> None:
    """The samplers' part reads each one's group latencies in one call while its identity
    and groups are the last sample's: values still change, a group read first, a group
    dropped (a reload) or a new identity object (a reset device) take the full path."""
    rng = random.Random(9)
    identities = [DeviceIdentity(f"GPU-{i}", i, "nvidia", "H100", f"0000:{i:02x}:00.0")
                  for i in range(3)]
    samplers = [FakeSampler(FakeSnapshot(identity)) for identity in identities]
    telemetry = SelfTelemetry(1)
    telemetry.watch_samplers(cast(list[DeviceSampler], samplers))
    last_keys: Any = None
    handed_on = 0
    for step in range(400):
        for sampler in samplers:
            stats = sampler.stats
            stats.cycles += rng.randrange(0, 2)
            stats.read_seconds_total += rng.choice((0.0, rng.uniform(0, 1e-2)))
            for group in ("fast", "processes", "gpm", "slow"):
                if rng.random() < (0.4 if group in stats.last_read_seconds else 0.01):
                    stats.last_read_seconds[group] = rng.choice((0.0, -0.0, 1, 2.5e-3))
            if rng.random() < 0.01:  # a reload: a group no longer read
                stats.last_read_seconds.pop(rng.choice(("fast", "gpm")), None)
            if rng.random() < 0.01:  # an equal identity, another object
                sampler.snapshot = FakeSnapshot(replace(sampler.snapshot.identity))
            if rng.random() < 0.005:  # another device in its place
                sampler.snapshot = FakeSnapshot(replace(sampler.snapshot.identity,
                                                        uuid=f"GPU-{step}", index=step))
        sample = telemetry.sample(step)
        assert sample.keys is not None and sample.values is not None
        ours = _written(list(zip(sample.keys.metrics, sample.values, sample.keys.attributes,
                                 strict=True)))
        assert ours == _of(tuple(r for s in samplers
                                 for r in sampler_readings(cast(DeviceSampler, s))))
        handed_on += sample.keys is last_keys
        last_keys = sample.keys
    assert handed_on > 300


def test_library_error_totals_are_the_old_sums_as_errors_come() -> None:
    """The errors part sums again only when a device's counts changed: its totals are
    ``library_error_readings``' at every sample, as errors first occur, recur, and GPUs
    are watched or no longer; an unchanged sample hands on the last layout object."""
    rng = random.Random(12)
    calls = ("nvmlDeviceGetClockInfo", "nvmlDeviceGetFanSpeed", "nvmlDeviceGetPowerUsage")
    codes = ("NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_TIMEOUT")
    devices = [FakeDevice() for _ in range(4)]
    telemetry = SelfTelemetry(1)
    present = devices
    telemetry.watch_devices(present)
    kept = 0
    last_keys: Any = None
    for step in range(300):
        if rng.random() < 0.1:
            device = rng.choice(devices)
            key = (rng.choice(calls), rng.choice(codes))
            device.errors[key] = device.errors.get(key, 0) + 1
        if rng.random() < 0.03:
            present = [d for d in devices if rng.random() > 0.3]
            telemetry.watch_devices(present)
        sample = telemetry.sample(step)
        assert sample.keys is not None and sample.values is not None
        ours = _written(list(zip(sample.keys.metrics, sample.values, sample.keys.attributes,
                                 strict=True)))
        assert ours == _of(library_error_readings(present))
        kept += sample.keys is last_keys
        last_keys = sample.keys
    assert kept > 150 and ours


def test_library_call_totals_when_the_gpus_call_the_same_functions() -> None:
    """The node's GPUs read the same groups, so they call the same functions between two
    samples: only the first GPU's pairs are looked through, the others' are compared whole
    outside what it called. Now and then a GPU calls one more function, or hands an equal
    pair anew (or a NaN time): the totals stay ``library_call_readings``', value and type."""
    rng = random.Random(13)
    names = [f"nvmlDeviceGet{i:02}" for i in range(24)]
    devices = [FakeDevice(times={name: (1, rng.uniform(0, 1e-3)) for name in names})
               for _ in range(8)]
    telemetry = SelfTelemetry(1)
    telemetry.watch_devices(devices)
    for step in range(400):
        grid = rng.sample(names, rng.choice((0, 3, 5, 5, 5, 13)))
        for device in devices:
            called = list(grid)
            if rng.random() < 0.1:  # one more, this GPU only
                called.append(rng.choice(names))
            for name in called:
                count, seconds = device.times[name]
                device.times[name] = (count + 1, seconds + rng.choice((0.0, 1e-4, 3e-5)))
            if rng.random() < 0.05:  # an equal pair, another object
                name = rng.choice(names)
                count, seconds = device.times[name]
                device.times[name] = (int(str(count)), float(str(seconds)))
            if rng.random() < 0.01:
                device.times[rng.choice(names)] = (7, math.nan)
        sample = telemetry.sample(step)
        assert sample.keys is not None and sample.values is not None
        ours = _written(list(zip(sample.keys.metrics, sample.values, sample.keys.attributes,
                                 strict=True)))
        assert ours == _of(library_call_readings(devices))
