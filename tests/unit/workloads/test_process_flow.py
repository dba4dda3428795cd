"""Processes flow one way: sampler (reads the list) -> attribution (publishes the readings) ->
store (the device's samples, as readers see them). A GPU that goes down loses its process
series with its other readings, and gets them back with its next list."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

from gpu_otel_agent.backends.protocol import DeviceLost
from gpu_otel_agent.config.load import load
from gpu_otel_agent.config.schema import GroupConfig
from gpu_otel_agent.model.process import ProcessUsage
from gpu_otel_agent.model.snapshot import DeviceIdentity, Reading, SnapshotStore
from gpu_otel_agent.runtime.config_holder import ConfigHolder
from gpu_otel_agent.sampling.sampler import DeviceSampler
from gpu_otel_agent.workloads.attribution import Attribution, AttributionSettings
from gpu_otel_agent.workloads.procfs import ProcReader
from gpu_otel_agent.workloads.resolver import WorkloadResolver


class _Device:
    """One GPU with one process on it (PID 10), until it is lost."""

    def __init__(self) -> None:
        self.identity = DeviceIdentity("GPU-0", 0, "test", "model", "bus0")
        self.current_call: str | None = None
        self.lost = threading.Event()

    def probe(self) -> frozenset[str]:
        if self.lost.is_set():
            raise DeviceLost("gone")
        return frozenset({"fast", "processes"})

    def read(self, group: str) -> tuple[Reading, ...]:
        if self.lost.is_set():
            raise DeviceLost("gone")
        return (Reading("hw.power", 300.0),)

    def read_processes(self) -> tuple[ProcessUsage, ...]:
        if self.lost.is_set():
            raise DeviceLost("gone")
        return (ProcessUsage(10, 1 << 20),)


async def _until(predicate: Any, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        assert asyncio.get_running_loop().time() < deadline, "condition not reached"
        await asyncio.sleep(0.02)


def test_a_lost_gpu_loses_its_process_series_and_gets_them_back(tmp_path: Path) -> None:
    (tmp_path / "10").mkdir()
    (tmp_path / "10" / "cgroup").write_text("0::/user.slice\n")
    (tmp_path / "10" / "comm").write_text("trainer\n")
    (tmp_path / "10" / "stat").write_text("10 (trainer) S 1 1 1\n")

    def processes(store: SnapshotStore) -> list[str]:
        samples = [d.samples["processes"] for d in store.current(0).devices
                   if "processes" in d.samples]
        return [str(dict(r.attributes)["process.executable.name"])
                for s in samples for r in s.readings if r.metric == "gpu.process.memory.usage"]

    async def scenario() -> None:
        store = SnapshotStore()
        attribution = Attribution(WorkloadResolver(ProcReader(tmp_path)),
                                  AttributionSettings())
        attribution.on_processes(store.put_processes)
        base = load(None, environ={})
        holder = ConfigHolder(replace(
            base, groups={"fast": GroupConfig(True, 0.05), "processes": GroupConfig(True, 0.05)},
            call_timeout=1.0, lost_reprobe_interval=0.05))
        device = _Device()
        sampler = DeviceSampler(device, store, holder, attribution=attribution)
        task = asyncio.create_task(sampler.run())
        try:
            await _until(lambda: processes(store) == ["trainer"])
            assert "processes" not in sampler.snapshot.samples  # attribution's, not the sampler's
            device.lost.set()
            await _until(lambda: not store.current(0).devices[0].samples)
            assert processes(store) == []
            device.lost.clear()
            await _until(lambda: processes(store) == ["trainer"])
        finally:
            task.cancel()
            sampler.close()

    asyncio.run(scenario())
