"""The sampler's isolation guarantees, with in-memory devices (the core knows no vendor)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

from gpu_otel_agent.backends.protocol import DeviceLost
from gpu_otel_agent.config.holder import ConfigHolder
from gpu_otel_agent.config.load import load
from gpu_otel_agent.config.schema import GroupConfig
from gpu_otel_agent.model.snapshot import DeviceIdentity, HealthState, Reading, SnapshotStore
from gpu_otel_agent.sampling.sampler import DeviceSampler
from tests.polling import until as _until


class ScriptedDevice:
    """Answers instantly unless told to block or to be lost."""

    def __init__(self, index: int) -> None:
        self.identity = DeviceIdentity(f"GPU-{index}", index, "test", "model", f"bus{index}")
        self.current_call: str | None = None
        self.gate = threading.Event()
        self.gate.set()
        self.lost = False
        self.reads = 0

    def probe(self) -> frozenset[str]:
        if self.lost:
            raise DeviceLost("gone")
        return frozenset({"fast"})

    def read(self, group: str) -> tuple[Reading, ...]:
        self.current_call = "slowCall"
        self.gate.wait()
        self.current_call = None
        if self.lost:
            raise DeviceLost("gone")
        self.reads += 1
        return (Reading("hw.power", float(self.reads)),)


def _config() -> ConfigHolder:
    base = load(None, environ={})
    groups = {"fast": GroupConfig(True, 0.05)}
    return ConfigHolder(replace(base, groups=groups, call_timeout=0.2,
                                lost_reprobe_interval=0.1))


def test_hung_device_is_unresponsive_while_others_keep_sampling() -> None:
    async def scenario() -> None:
        store = SnapshotStore()
        holder = _config()
        hung, healthy = ScriptedDevice(0), ScriptedDevice(1)
        samplers = [DeviceSampler(d, store, holder) for d in (hung, healthy)]
        tasks = [asyncio.create_task(s.run()) for s in samplers]
        await _until(lambda: hung.reads > 0)
        hung.gate.clear()
        await _until(lambda: samplers[0].snapshot.health is HealthState.DEGRADED)
        assert "slowCall" in samplers[0].snapshot.reason
        assert not samplers[0].snapshot.samples  # readings absent, not stale
        # The healthy GPU keeps its cycles while the other's call is still stuck: counted in
        # its own reads, not in a wall-clock window (a loaded machine may run few per second).
        before, stuck = healthy.reads, hung.reads
        await _until(lambda: healthy.reads >= before + 5, timeout=60)
        assert hung.reads == stuck  # still inside the one hung call
        assert samplers[0].snapshot.health is HealthState.DEGRADED
        hung.gate.set()
        await _until(lambda: samplers[0].snapshot.health is HealthState.OK)
        await _until(lambda: bool(samplers[0].snapshot.samples))
        for task in tasks:
            task.cancel()
        for s in samplers:
            s.close()

    asyncio.run(scenario())


def test_lost_device_fails_then_resumes_after_reprobe() -> None:
    async def scenario() -> None:
        store = SnapshotStore()
        device = ScriptedDevice(0)
        sampler = DeviceSampler(device, store, _config())
        task = asyncio.create_task(sampler.run())
        await _until(lambda: device.reads > 0)
        device.lost = True
        await _until(lambda: sampler.snapshot.health is HealthState.FAILED)
        assert not sampler.snapshot.samples
        device.lost = False
        await _until(lambda: sampler.snapshot.health is HealthState.OK)
        await _until(lambda: bool(sampler.snapshot.samples))
        task.cancel()
        sampler.close()

    asyncio.run(scenario())
