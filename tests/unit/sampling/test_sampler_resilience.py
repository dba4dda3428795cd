"""The sampler under a failing library: probe errors, reset required, counters that go back."""

from __future__ import annotations

import asyncio
from dataclasses import replace

from gpu_otel_agent.backends.protocol import DeviceLost, DeviceNeedsReset
from gpu_otel_agent.config.holder import ConfigHolder
from gpu_otel_agent.config.load import load
from gpu_otel_agent.config.schema import GroupConfig
from gpu_otel_agent.export.metrics.series import series
from gpu_otel_agent.model.counters import CounterRestarts
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    HealthState,
    NodeSnapshot,
    Reading,
    SnapshotStore,
)
from gpu_otel_agent.sampling.sampler import DeviceSampler
from tests.polling import until as _until


class FlakyDevice:
    """Probe raises what it is told to, a number of times; reads serve a scripted energy."""

    def __init__(self, probe_errors: list[Exception], energy: list[float] | None = None) -> None:
        self.identity = DeviceIdentity("GPU-0", 0, "test", "model", "bus0")
        self.current_call: str | None = None
        self.probe_errors = probe_errors
        self.energy = energy or [1.0]
        self.probes = 0
        self.reads = 0
        self.read_error: Exception | None = None

    def probe(self) -> frozenset[str]:
        self.probes += 1
        if self.probe_errors:
            raise self.probe_errors.pop(0)
        return frozenset({"fast"})

    def read(self, group: str) -> tuple[Reading, ...]:
        if self.read_error is not None:
            raise self.read_error
        value = self.energy[min(self.reads, len(self.energy) - 1)]
        self.reads += 1
        return (Reading("hw.energy", value), Reading("hw.power", 100.0))


def _config() -> ConfigHolder:
    base = load(None, environ={})
    return ConfigHolder(replace(base, groups={"fast": GroupConfig(True, 0.02)},
                                call_timeout=1.0, lost_reprobe_interval=0.05))


def _run(device: FlakyDevice, until: object) -> DeviceSampler:
    async def scenario() -> DeviceSampler:
        sampler = DeviceSampler(device, SnapshotStore(), _config())
        task = asyncio.create_task(sampler.run())
        try:
            await _until(lambda: task.done() or until())  # type: ignore[operator]
            assert not task.done(), f"the sampler task ended: {task.exception()!r}"
        finally:
            task.cancel()
            sampler.close()
        return sampler

    return asyncio.run(scenario())


def test_an_unexpected_error_at_probe_does_not_end_the_sampler() -> None:
    # What escaped probe() before (a transient pynvml error) ended the task for good.
    device = FlakyDevice([RuntimeError("NVML_ERROR_UNKNOWN"), RuntimeError("again")])
    sampler = _run(device, lambda: device.reads >= 3)
    assert device.probes == 3
    assert sampler.stats.errors == 2
    assert sampler.snapshot.health is HealthState.OK


def test_reset_required_is_a_failed_state_with_its_reason() -> None:
    device = FlakyDevice([])
    device.read_error = DeviceNeedsReset("nvmlDeviceGetPowerUsage: GPU requires restart")

    async def scenario() -> None:
        sampler = DeviceSampler(device, SnapshotStore(), _config())
        task = asyncio.create_task(sampler.run())
        await _until(lambda: sampler.snapshot.health is HealthState.FAILED)
        # Before: RESET_REQUIRED was transient, the GPU "ok" with gaps.
        assert sampler.snapshot.reason.startswith("lost: reset required:")
        assert not sampler.snapshot.samples  # no readings from a GPU that needs a reset
        device.read_error = None  # reset done: the re-probe finds it again
        await _until(lambda: sampler.snapshot.health is HealthState.OK
                     and bool(sampler.snapshot.samples))
        task.cancel()
        sampler.close()

    asyncio.run(scenario())
    assert issubclass(DeviceNeedsReset, DeviceLost)


def test_a_counter_that_goes_backwards_restarts_with_a_new_start_time() -> None:
    device = FlakyDevice([], energy=[100.0, 150.0, 5.0, 20.0])
    store = SnapshotStore()
    points: list[tuple[int, int, float]] = []  # (start, time, value) of hw.energy

    async def scenario() -> None:
        sampler = DeviceSampler(device, store, _config())
        task = asyncio.create_task(sampler.run())
        last = -1
        while device.reads < 4 or last < 3:
            await asyncio.sleep(0.005)
            snap = NodeSnapshot(store.devices(), 0)
            for point in series(snap).get("hw.energy", []):
                if not points or points[-1][1] != point.time_ns:
                    points.append((point.start_time_ns, point.time_ns, float(point.value)))
                    last = len(points) - 1
        task.cancel()
        sampler.close()

    asyncio.run(scenario())
    values = [value for _, _, value in points]
    assert values[:4] == [100.0, 150.0, 5.0, 20.0], values
    starts = [start for start, _, _ in points[:4]]
    assert starts[0] == starts[1]  # one series while it grows
    assert starts[2] != starts[1]  # the drop starts a new one ...
    assert points[1][1] < starts[2] <= points[2][1]  # ... after the last point of the old
    assert starts[3] == starts[2]
    # Power is a gauge: never restarted.
    snap = NodeSnapshot(store.devices(), 0)
    assert {p.start_time_ns for p in series(snap)["hw.power"]} == {starts[0]}


def test_counter_restarts_only_for_counters() -> None:
    restarts = CounterRestarts(default_start_ns=10)
    assert not restarts.observe([Reading("hw.power", 5.0), Reading("hw.energy", 9.0)], 100)
    assert not restarts.observe([Reading("hw.power", 1.0), Reading("hw.energy", 9.0)], 200)
    assert restarts.starts() == {}
    assert restarts.observe([Reading("hw.energy", 2.0)], 300)
    assert restarts.starts() == {("hw.energy", ()): 201}
    assert restarts.restarts == 1
