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
from gpu_otel_agent.threads.relay import Relay
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


def test_with_a_relay_a_hung_device_is_unresponsive_and_recovers_while_others_sample() -> None:
    """Devices that share a relay (as the agent's do) get their results on the loop together;
    a device hung in its leg still holds the others back only briefly, and its own call
    still ends by its deadline and recovers when it returns."""
    async def scenario() -> None:
        store = SnapshotStore()
        holder = _config()
        relay = Relay()
        hung, *healthy = (ScriptedDevice(i) for i in range(3))
        samplers = [DeviceSampler(d, store, holder, relay=relay) for d in (hung, *healthy)]
        tasks = [asyncio.create_task(s.run()) for s in samplers]
        await _until(lambda: hung.reads > 0 and all(d.reads > 0 for d in healthy))
        hung.gate.clear()
        await _until(lambda: samplers[0].snapshot.health is HealthState.DEGRADED)
        assert samplers[0].stats.deadline_overruns >= 1
        before = [d.reads for d in healthy]
        await _until(lambda: all(d.reads >= b + 5 for d, b in zip(healthy, before, strict=True)),
                     timeout=60)
        assert all(s.snapshot.health is HealthState.OK for s in samplers[1:])
        hung.gate.set()
        await _until(lambda: samplers[0].snapshot.health is HealthState.OK)
        reads = hung.reads
        await _until(lambda: hung.reads > reads)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for s in samplers:
            s.close()

    asyncio.run(scenario())


def test_a_reload_cuts_a_group_loops_sleep_short() -> None:
    async def scenario() -> None:
        store = SnapshotStore()
        holder = _config()
        slow = replace(holder.current, groups={"fast": GroupConfig(True, 3600.0)})
        holder.replace(slow)
        devices = [ScriptedDevice(i) for i in range(2)]
        relay = Relay()
        samplers = [DeviceSampler(d, store, holder, relay=relay) for d in devices]
        tasks = [asyncio.create_task(s.run()) for s in samplers]
        await _until(lambda: all(d.reads == 1 for d in devices))  # the first read, at once
        # Both sleep until the same tick an hour away; the reload wakes them now.
        holder.replace(replace(slow, groups={"fast": GroupConfig(True, 0.05)}))
        await _until(lambda: all(d.reads >= 3 for d in devices), timeout=60)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for s in samplers:
            s.close()

    asyncio.run(scenario())
