"""Self-telemetry and node-level samples of the last one's shape are handed out as
``series.ShapedRun``s (values picked in C calls, no ``SeriesPoint``), so their metrics are
written from templates like the devices'; what goes out must be, export after export, what
the general path writes for the same snapshot.

The reference is a fresh ``ProtoEncoder`` with nothing kept in ``series`` and no sample given
a shape, so every point is a ``SeriesPoint`` packed one by one; and, decoded with
opentelemetry-proto's generated classes, the OpenTelemetry SDK's encoder. The samples change
as the agent's do: counters move every export, GPUs (and so their self-telemetry series) come
and go, groups are added, library functions are first called or first fail, values become
NaN, infinite, beyond 64 bits or a float, attribute tuples are new but equal, the
agent's start changes (a reload that restarts the counters), node plugins keep their sample,
replace it, withdraw it, or add a second one, and processes come and go on the devices.
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
    AgentSample,
    Attributes,
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
)
from tests.unit.export.metrics.reference_exports import check_export, general_path
from tests.unit.export.metrics.series_end_points import Series

RESOURCE = Resource.create({"service.name": "gpu-otel-agent", "host.name": "node-1"})
CALLS = ("nvmlDeviceGetFieldValues", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetProcessUtilization")


def _odd(rng: random.Random, value: float | int) -> float | int:
    """Now and then a value that changes the shape: dropped, or an int that is a float (a
    bool value the SDK encoder refuses, so it is left out here)."""
    roll = rng.random()
    if roll < 0.02:
        return rng.choice((math.nan, math.inf, -math.inf))
    if roll < 0.03:
        return 1 << 64
    if roll < 0.05 and isinstance(value, int):
        return float(value)
    return value


class _Agent:
    """The agent's counters from export to export, moved and changed at random."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.start = 500
        self.gpus = [0, 1, 2]
        self.cycles = dict.fromkeys(range(4), 0)
        self.groups = ["fast"]
        self.calls = {name: (0, 0.0) for name in CALLS[:2]}
        self.errors: dict[tuple[str, str], int] = {}
        self.exports = 0
        self.node: tuple[AgentSample, ...] = ()

    def _device(self, gpu: int) -> list[Reading]:
        rng = self.rng
        device: Attributes = (("hw.id", f"GPU-{gpu}"), ("gpu.index", gpu))
        if rng.random() < 0.1:  # an equal tuple, a new object (the agent builds new ones)
            device = tuple(list(device))
        self.cycles[gpu] += rng.randrange(0, 3)
        readings = [
            Reading("gpu_agent.cycles.completed", _odd(rng, self.cycles[gpu]), device),
            Reading("gpu_agent.cycles.missed", rng.randrange(0, 2), device),
            Reading("gpu_agent.cycle.time", _odd(rng, self.cycles[gpu] * 0.01), device),
            Reading("gpu_agent.read.errors", 0, device),
        ]
        readings += [Reading("gpu_agent.cycle.latency", _odd(rng, rng.uniform(0, 0.01)),
                             (*device, ("gpu_agent.group", group)))
                     for group in sorted(self.groups)]
        return readings

    def step(self, step: int) -> AgentSample:
        rng = self.rng
        if rng.random() < 0.06:  # a GPU lost or found
            self.gpus = sorted(rng.sample(range(4), rng.randrange(1, 5)))
        if rng.random() < 0.05 and len(self.groups) < 4:
            self.groups.append(("processes", "gpm", "slow")[len(self.groups) - 1])
        if rng.random() < 0.05:
            self.calls.setdefault(rng.choice(CALLS), (0, 0.0))
        if rng.random() < 0.05:
            key = (rng.choice(CALLS), rng.choice(("NVML_ERROR_TIMEOUT", "NVML_ERROR_GPU_IS_LOST")))
            self.errors[key] = self.errors.get(key, 0) + 1
        if rng.random() < 0.03:  # a reload: the agent's counters start again
            self.start = 500 + step
        self.calls = {name: (calls + rng.randrange(0, 9), seconds + rng.uniform(0, 0.01))
                      for name, (calls, seconds) in self.calls.items()}
        self.exports += 1
        readings: list[Reading] = []
        for gpu in self.gpus:
            readings += self._device(gpu)
        for name, (calls, seconds) in sorted(self.calls.items()):
            call = (("gpu_agent.call", name),)
            readings += (Reading("gpu_agent.library.calls", _odd(rng, calls), call),
                         Reading("gpu_agent.library.call.time", seconds, call))
        readings += [Reading("gpu_agent.library.errors", count,
                             (("gpu_agent.call", call), ("error.type", code)))
                     for (call, code), count in sorted(self.errors.items())]
        readings.append(Reading("gpu_agent.exports.completed", self.exports))
        readings.append(Reading("gpu_agent.readings.dropped", 0))
        readings.append(Reading("gpu_agent.exports.throttle.remaining",
                                _odd(rng, rng.uniform(0, 5)), (("server.address", "a:4317"),)))
        return AgentSample(tuple(readings), self.start, 10_000 + step * 10)

    def node_samples(self, step: int) -> tuple[AgentSample, ...]:
        """A node plugin's samples: kept (the same objects) most exports, else replaced,
        withdrawn, or joined by a second source's."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.3 or not self.node:
            count = rng.choice((1, 1, 2)) if roll > 0.05 else 0
            self.node = tuple(
                AgentSample((Reading("gpu_agent.ebpf.process.count", rng.randrange(0, 40)),
                             Reading("gpu_agent.ebpf.events.lost",
                                     _odd(rng, rng.randrange(0, 3)))), 400 + source,
                            10_000 + step * 10 - 3)
                for source in range(count))
        return self.node


def _snapshots(seed: int, exports: int) -> Iterator[NodeSnapshot]:
    rng = random.Random(seed)
    agent = _Agent(rng)
    identity = DeviceIdentity("GPU-0", 0, "nvidia", "H100", "0000:00:00.0")
    pids = [10, 11]
    for step in range(exports):
        if rng.random() < 0.2:  # processes come and go
            pids = rng.sample(range(10, 20), rng.randrange(0, 4))
        device = DeviceSnapshot(identity, HealthState.OK, 100).with_sample(
            GroupSample("fast", (Reading("hw.power", rng.uniform(0, 700)),), 9_000 + step))
        device = device.with_sample(GroupSample("processes", tuple(
            Reading("gpu.process.memory.usage", rng.randrange(0, 1 << 30),
                    (("process.pid", pid),)) for pid in pids), 9_000 + step))
        sample = agent.step(step)
        yield NodeSnapshot((device,), taken_ns=10_000 + step * 10,
                           agent=sample if rng.random() > 0.03 else None,
                           node=agent.node_samples(step), health=MappingProxyType({}))


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_self_telemetry_from_templates_sends_what_a_fresh_encoding_sends(seed: int) -> None:
    kept = ProtoEncoder(RESOURCE)
    previous: set[Series] = set()
    shaped = runs = ended = 0
    for snapshot in _snapshots(seed, 150):
        grouped = series_runs(snapshot)
        own = [run for name, r in grouped.items() if name.startswith("gpu_agent.") for run in r]
        shaped += sum(type(run) is ShapedRun for run in own)
        runs += len(own)
        count, previous = check_export(kept, snapshot, previous, RESOURCE)
        ended += count
    # Most self-telemetry runs went the shaped way, and series did end.
    assert shaped * 2 > runs
    assert ended > 0


def test_shaped_self_telemetry_iterates_as_the_general_path_builds_it() -> None:
    """/metrics and the SDK fallback iterate runs: the same points either way."""
    for snapshot in _snapshots(11, 60):
        runs = series_runs(snapshot)
        with general_path():
            reference = series_runs(snapshot)
        assert not any(type(run) is ShapedRun for r in reference.values() for run in r)
        assert {m: [list(run) for run in r] for m, r in runs.items()} == \
            {m: [list(run) for run in r] for m, r in reference.items()}
