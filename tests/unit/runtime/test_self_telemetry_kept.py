"""Self-telemetry hands the last sample's ``Reading`` on while a series' value is the same
(``self_telemetry._Kept``): every sample must still be what readings built afresh give, value
types and signs included, over counters that move, stay, turn to floats, to -0.0 and NaN,
GPUs and library functions that come and go, and groups that are added."""

from __future__ import annotations

import math
import random
from typing import cast

from gpu_otel_agent.model.snapshot import DeviceIdentity, Reading
from gpu_otel_agent.runtime.self_telemetry import (
    SelfTelemetry,
    library_call_readings,
    library_error_readings,
    sampler_readings,
)
from gpu_otel_agent.sampling.sampler import DeviceSampler
from tests.unit.runtime.self_telemetry_doubles import (
    FakeDevice,
    FakeSampler,
    FakeSnapshot,
    step_devices,
)

CALLS = ("nvmlDeviceGetFieldValues", "nvmlDeviceGetPowerUsage", "nvmlDeviceGetClockInfo")
CODES = ("NVML_ERROR_TIMEOUT", "NVML_ERROR_GPU_IS_LOST")


def _odd(rng: random.Random, value: float) -> float | int:
    """The value, or now and then one whose equal neighbour is written differently: 0.0 and
    -0.0, an int equal to a float, NaN."""
    whole = round(value) if math.isfinite(value) else 0
    return rng.choice((value, value, value, value, 0.0, -0.0, math.nan, whole, 0))


def _written(readings: tuple[Reading, ...]) -> list[tuple[str, str, type, object]]:
    """What the wire carries of each: metric, value with its type and sign, attributes."""
    return [(r.metric, repr(r.value), type(r.value), r.attributes) for r in readings]


def test_kept_readings_are_what_fresh_readings_are() -> None:
    rng = random.Random(9)
    samplers = [FakeSampler(FakeSnapshot(DeviceIdentity(f"GPU-{i}", i, "nvidia", "H100",
                                                        f"0000:{i:02x}:00.0")))
                for i in range(3)]
    devices = [FakeDevice() for _ in range(3)]
    telemetry = SelfTelemetry(100)
    telemetry.watch_samplers(cast(list[DeviceSampler], samplers))
    telemetry.watch_devices(devices)
    handed_on = 0
    last: dict[tuple[str, object], Reading] = {}
    for step in range(400):
        for sampler in samplers:
            stats = sampler.stats
            if rng.random() < 0.5:
                stats.cycles += 1
            if rng.random() < 0.05:
                stats.missed_cycles += 1
            if rng.random() < 0.3:
                stats.read_seconds_total = _odd(rng, rng.uniform(0, 0.01))
            if rng.random() < 0.2:
                group = rng.choice(("fast", "processes", "gpm", "slow"))
                stats.last_read_seconds[group] = _odd(rng, rng.uniform(0, 0.01))
        step_devices(rng, devices, CALLS, CODES, forget=0.05, fail=0.05)
        present = [d for d in devices if rng.random() > 0.1]  # a GPU gone for a sample
        telemetry.watch_devices(present)
        telemetry.watch_samplers(cast(list[DeviceSampler], [
            s for s, d in zip(samplers, devices, strict=True) if d in present]))
        ours = telemetry.sample(1_000 + step).readings
        fresh = (*(r for s, d in zip(samplers, devices, strict=True) if d in present
                   for r in sampler_readings(cast(DeviceSampler, s))),
                 *library_call_readings(present), *library_error_readings(present))
        assert _written(ours) == _written(fresh)
        handed_on += sum(last.get((r.metric, r.attributes)) is r for r in ours)
        last = {(r.metric, r.attributes): r for r in ours}
    assert handed_on > 0  # the kept path was taken, and often
