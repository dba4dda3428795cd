"""Self-telemetry hands its values with the keys they are for (``AgentSample.of_values``), and
series takes the values of a sample of the last one's keys object as they are: no ``Reading``
per counter is built or compared. Sample after sample, over counters that move, stay, turn to
floats, -0.0, NaN and beyond 64 bits, GPUs and library functions that come and go (a reload
watching other samplers and devices), errors that first occur, and sources whose readings
change in number, attributes and type, this must be what readings built afresh by the old
functions (``sampler_readings``, ``library_call_readings``, ``library_error_readings``, the
sources' own) say, and what goes out must be what a fresh encoder and the SDK's send for them.
"""

from __future__ import annotations

import copy
import math
import pickle
import random
from typing import cast

import pytest
from opentelemetry.sdk.resources import Resource

from gpu_otel_agent.export.metrics.otlp_proto import ProtoEncoder
from gpu_otel_agent.export.metrics.series import series_runs
from gpu_otel_agent.model.snapshot import (
    AgentSample,
    DeviceIdentity,
    NodeSnapshot,
    Reading,
    ReadingKeys,
)
from gpu_otel_agent.runtime.self_telemetry import (
    SelfTelemetry,
    library_call_readings,
    library_error_readings,
    sampler_readings,
)
from gpu_otel_agent.sampling.sampler import DeviceSampler
from tests.unit.export.metrics.reference_exports import check_export
from tests.unit.export.metrics.series_end_points import Series
from tests.unit.runtime.self_telemetry_doubles import (
    FakeDevice,
    FakeSampler,
    FakeSnapshot,
    step_devices,
)

RESOURCE = Resource.create({"service.name": "gpu-otel-agent", "host.name": "node-1"})
CALLS = ("nvmlDeviceGetFieldValues", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetClockInfo",
         "nvmlDeviceGetProcessUtilization")
CODES = ("NVML_ERROR_TIMEOUT", "NVML_ERROR_GPU_IS_LOST")


def _odd(rng: random.Random, value: float) -> float | int:
    """The value, or now and then one that is written differently from its equal neighbour
    (0.0 and -0.0, an int and a float), not finite, or beyond 64 bits."""
    if rng.random() < 0.9:
        return value
    return rng.choice((0.0, -0.0, math.nan, math.inf, round(value), 0, 1 << 64))


class _Source:
    """A source of readings (as the export counters, reliability or a node plugin give):
    mostly the same series, now and then one more, one fewer, other attributes."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.count = 0
        self.endpoints = ["a:4317"]
        self.last: tuple[Reading, ...] = ()  # what the last call gave

    def __call__(self) -> tuple[Reading, ...]:
        rng = self.rng
        self.count += rng.randrange(0, 3)
        if rng.random() < 0.05:
            self.endpoints = rng.sample(["a:4317", "b:4317", "c:4318"], rng.randrange(0, 3))
        self.last = (Reading("gpu_agent.exports.completed", self.count),
                     *(Reading("gpu_agent.exports.held", _odd(rng, rng.uniform(0, 5)),
                               (("server.address", endpoint),)) for endpoint in self.endpoints),
                     Reading("gpu_agent.readings.dropped", rng.choice((0, 0, 0, 1))))
        return self.last


def _written(triples: list[tuple[str, object, tuple[object, ...]]]) -> list[tuple[object, ...]]:
    """What the wire carries of each: metric, value with its type and sign, attributes."""
    return [(metric, repr(value), type(value), attributes)
            for metric, value, attributes in triples]


def _of(readings: tuple[Reading, ...]) -> list[tuple[object, ...]]:
    return _written([(r.metric, r.value, r.attributes) for r in readings])


def _step(rng: random.Random, samplers: list[FakeSampler], devices: list[FakeDevice]) -> None:
    for sampler in samplers:
        stats = sampler.stats
        if rng.random() < 0.6:
            stats.cycles += 1
        if rng.random() < 0.05:
            stats.missed_cycles += 1
        if rng.random() < 0.02:
            stats.errors = _odd(rng, float(stats.errors))  # type: ignore[assignment]
        if rng.random() < 0.4:
            stats.read_seconds_total = _odd(rng, rng.uniform(0, 0.01))
        if rng.random() < 0.4:
            group = rng.choice(("fast", "processes", "gpm", "slow"))
            stats.last_read_seconds[group] = _odd(rng, rng.uniform(0, 0.01))
    step_devices(rng, devices, CALLS, CODES, forget=0.03, fail=0.03)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_values_and_keys_are_what_fresh_readings_are_and_send_the_same(seed: int) -> None:
    rng = random.Random(seed)
    samplers = [FakeSampler(FakeSnapshot(DeviceIdentity(f"GPU-{i}", i, "nvidia", "H100",
                                                        f"0000:{i:02x}:00.0")))
                for i in range(4)]
    devices = [FakeDevice() for _ in range(4)]
    sources = [_Source(rng), _Source(rng)]
    telemetry = SelfTelemetry(100)
    for source in sources:
        telemetry.add(source)
    kept = ProtoEncoder(RESOURCE)
    previous: set[Series] = set()
    last_keys = None
    handed_on = unbuilt = ended = 0
    present = devices
    for step in range(250):
        _step(rng, samplers, devices)
        if step == 0 or rng.random() < 0.08:  # a reload: other GPUs watched
            present = [d for d in devices if rng.random() > 0.2]
            telemetry.watch_devices(present)
            telemetry.watch_samplers(cast(list[DeviceSampler], [
                s for s, d in zip(samplers, devices, strict=True) if d in present]))
        if rng.random() < 0.02:  # the agent restarted its counters
            telemetry = SelfTelemetry(100 + step)
            telemetry.watch_devices(present)
            telemetry.watch_samplers(cast(list[DeviceSampler], [
                s for s, d in zip(samplers, devices, strict=True) if d in present]))
            for source in sources:
                telemetry.add(source)
        sample = telemetry.sample(1_000 + step)
        keys, values = sample.keys, sample.values
        assert keys is not None and values is not None
        fresh = (*(r for s, d in zip(samplers, devices, strict=True) if d in present
                   for r in sampler_readings(cast(DeviceSampler, s))),
                 *library_call_readings(present), *library_error_readings(present),
                 *(r for source in sources for r in source.last))
        ours = _written(list(zip(keys.metrics, values, keys.attributes, strict=True)))
        assert ours == _of(fresh)
        handed_on += keys is last_keys
        last_keys = keys
        snapshot = NodeSnapshot((), taken_ns=2_000 + step, agent=sample)
        series_runs(snapshot)
        unbuilt += sample._readings is None  # series took the values: no reading built
        count, previous = check_export(kept, snapshot, previous, RESOURCE)
        ended += count
        # The readings, when looked at, are the fresh ones, the sources' own included.
        assert _of(sample.readings) == ours
        assert sample == AgentSample(sample.readings, sample.start_time_ns, sample.time_ns)
    assert handed_on > 100 and unbuilt > 20  # the fast path was taken, and often
    assert ended > 0  # series ended (GPUs, functions, endpoints gone)


def test_a_sample_of_values_is_the_sample_of_its_readings() -> None:
    readings = (Reading("gpu_agent.scrapes", 1), Reading("gpu_agent.exports.held", 0.5,
                                                         (("server.address", "a"),)))
    built: list[int] = []

    def build() -> tuple[Reading, ...]:
        built.append(1)
        return readings

    keys = ReadingKeys(("gpu_agent.scrapes", "gpu_agent.exports.held"),
                       ((), (("server.address", "a"),)))
    sample = AgentSample.of_values(keys, [1, 0.5], 10, 20, build)
    plain = AgentSample(readings, 10, 20)
    assert not built
    assert sample == plain and hash(sample) == hash(plain) and repr(sample) == repr(plain)
    assert sample.readings is readings and built == [1]
    assert sample.readings is readings and built == [1]  # built once
    assert sample != AgentSample(readings, 10, 21)
    assert copy.deepcopy(sample) == sample == pickle.loads(pickle.dumps(sample))
    with pytest.raises(AttributeError):
        sample.time_ns = 5
    with pytest.raises(ValueError, match="1 values for 2 series"):
        AgentSample.of_values(keys, [1], 10, 20, build)


def test_library_call_totals_are_the_old_sums_as_functions_are_called() -> None:
    """Many functions, a few called per sample (only those summed again), now and then one
    called first, forgotten, or by some GPUs only: the totals are ``library_call_readings``'
    (the same floats: each sum in device order)."""
    rng = random.Random(5)
    names = [f"nvmlDeviceGet{i:02}" for i in range(24)]
    devices = [FakeDevice(times={name: (1, rng.uniform(0, 1e-3)) for name in names[:20]})
               for _ in range(8)]
    telemetry = SelfTelemetry(1)
    telemetry.watch_devices(devices)
    for step in range(300):
        for device in devices:
            for name in rng.sample(names[:20], rng.randrange(0, 4)):
                calls, seconds = device.times.get(name, (0, 0.0))
                device.times[name] = (calls + 1, seconds + rng.uniform(0, 1e-4))
        if rng.random() < 0.05:  # a function first called, by one GPU or by all
            name = rng.choice(names)
            for device in rng.sample(devices, rng.choice((1, len(devices)))):
                device.times[name] = (1, rng.uniform(0, 1e-3))
        if rng.random() < 0.03:  # a GPU forgets one (a reset device)
            rng.choice(devices).times.pop(rng.choice(names), None)
        if step == 150:
            telemetry.watch_devices(devices[:5])
        present = devices if step < 150 else devices[:5]
        sample = telemetry.sample(step)
        assert sample.keys is not None and sample.values is not None
        ours = _written(list(zip(sample.keys.metrics, sample.values, sample.keys.attributes,
                                 strict=True)))
        assert ours == _of(library_call_readings(present))
