"""Stand-ins for what self-telemetry reads from the samplers and devices (their snapshot's
identity, their stats, a device's library call times and errors), shared by the tests that
drive ``SelfTelemetry`` and its sources with changing values."""

from __future__ import annotations

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
