"""Stand-ins for what self-telemetry reads from the samplers and devices (their snapshot's
identity, their stats, a device's library call times and errors), shared by the tests that
drive ``SelfTelemetry`` and its sources with changing values."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from gpu_otel_agent.model.snapshot import DeviceIdentity
from gpu_otel_agent.sampling.sampler import SamplerStats


@dataclass
class FakeSnapshot:
    identity: DeviceIdentity


@dataclass
class FakeSampler:
    snapshot: FakeSnapshot
    stats: SamplerStats = field(default_factory=SamplerStats)


@dataclass
class FakeDevice:
    """A device's library call times and errors (what ``CallTimed``/``ErrorCounted`` read)."""

    times: dict[str, tuple[int, float]] = field(default_factory=dict)
    errors: dict[tuple[str, str], int] = field(default_factory=dict)

    def call_times(self) -> dict[str, tuple[int, float]]:
        return dict(self.times)

    def error_counts(self) -> dict[tuple[str, str], int]:
        return dict(self.errors)


def step_devices(rng: random.Random, devices: list[FakeDevice], calls: tuple[str, ...],
                 codes: tuple[str, ...], *, forget: float, fail: float) -> None:
    """One sample's worth of library use: a function's totals dropped now and then
    (``forget``), some functions called (0-2 calls, time or none), an error now and then
    (``fail``)."""
    for device in devices:
        if rng.random() < forget:
            device.times.pop(rng.choice(calls), None)
        for name in rng.sample(calls, rng.randrange(0, len(calls) + 1)):
            count, seconds = device.times.get(name, (0, 0.0))
            device.times[name] = (count + rng.randrange(0, 3),
                                  seconds + rng.choice((0.0, rng.uniform(0, 1e-3))))
        if rng.random() < fail:
            key = (rng.choice(calls), rng.choice(codes))
            device.errors[key] = device.errors.get(key, 0) + 1
