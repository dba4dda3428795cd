"""Processes flow one way: sampler (reads the list) -> attribution (publishes the readings) ->
store (the device's samples, as readers see them). A GPU that goes down loses its process
series with its other readings, and gets them back with its next list."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace
from pathlib import Path

from gpu_otel_agent.backends.protocol import Device, DeviceLost
from gpu_otel_agent.config.holder import ConfigHolder
from gpu_otel_agent.config.load import load
from gpu_otel_agent.config.schema import GroupConfig
from gpu_otel_agent.model.process import ProcessUsage
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DevicePartition,
    Reading,
    SnapshotStore,
)
from gpu_otel_agent.sampling.sampler import DeviceSampler
from gpu_otel_agent.workloads.attribution import Attribution, AttributionSettings
from gpu_otel_agent.workloads.procfs import ProcReader
from gpu_otel_agent.workloads.resolver import WorkloadResolver
from tests.polling import until as _until


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


def _write_proc(root: Path) -> None:
    """PID 10, ``trainer``, in /proc as the resolver reads it."""
    (root / "10").mkdir()
    (root / "10" / "cgroup").write_text("0::/user.slice\n")
    (root / "10" / "comm").write_text("trainer\n")
    (root / "10" / "stat").write_text("10 (trainer) S 1 1 1\n")


def _processes(store: SnapshotStore) -> list[str]:
    """The executables of every device's process series, as a reader of the store sees them."""
    samples = [d.samples["processes"] for d in store.current(0).devices
               if "processes" in d.samples]
    return [str(dict(r.attributes)["process.executable.name"])
            for s in samples for r in s.readings if r.metric == "gpu.process.memory.usage"]


def _holder() -> ConfigHolder:
    base = load(None, environ={})
    return ConfigHolder(replace(
        base, groups={"fast": GroupConfig(True, 0.05), "processes": GroupConfig(True, 0.05)},
        call_timeout=1.0, lost_reprobe_interval=0.05))


def _wired(proc: Path) -> tuple[SnapshotStore, Attribution, ConfigHolder]:
    """A store, attribution publishing into it (as the agent wires them), a config holder."""
    store = SnapshotStore()
    attribution = Attribution(WorkloadResolver(ProcReader(proc)), AttributionSettings(),
                              put_processes=store.put_processes)
    return store, attribution, _holder()


def test_a_lost_gpu_loses_its_process_series_and_gets_them_back(tmp_path: Path) -> None:
    _write_proc(tmp_path)

    async def scenario() -> None:
        store, attribution, holder = _wired(tmp_path)
        device = _Device()
        sampler = DeviceSampler(device, store, holder, attribution=attribution)
        task = asyncio.create_task(sampler.run())
        try:
            await _until(lambda: _processes(store) == ["trainer"])
            assert "processes" not in sampler.snapshot.samples  # attribution's, not the sampler's
            device.lost.set()
            await _until(lambda: not store.current(0).devices[0].samples)
            assert _processes(store) == []
            device.lost.clear()
            await _until(lambda: _processes(store) == ["trainer"])
        finally:
            task.cancel()
            sampler.close()

    asyncio.run(scenario())


class _Partition(_Device):
    def __init__(self, parent: str) -> None:
        super().__init__()
        self.identity = DeviceIdentity("MIG-0", 0, "test", "model", "bus0",
                                       DevicePartition(parent, "test", "1g"))

    def probe(self) -> frozenset[str]:
        return frozenset({"processes"})


class _Parent(_Device):
    """A partitioned GPU: its process runs on its one partition."""

    def __init__(self) -> None:
        super().__init__()
        self.child = _Partition(self.identity.uuid)

    def probe(self) -> frozenset[str]:
        return frozenset({"fast"})

    def partitions(self) -> tuple[Device, ...]:
        return (self.child,)


def test_switching_the_processes_group_off_withdraws_the_partitions_processes_too(
        tmp_path: Path) -> None:
    """Before, a reload that switched the group off dropped only the parent's process sample:
    a partition's processes stayed exported, frozen, until the agent restarted."""
    _write_proc(tmp_path)

    async def scenario() -> None:
        store, attribution, holder = _wired(tmp_path)
        parent = _Parent()
        sampler = DeviceSampler(parent, store, holder, attribution=attribution)
        task = asyncio.create_task(sampler.run())
        try:
            await _until(lambda: _processes(store) == ["trainer"])
            groups = dict(holder.current.groups)
            groups["processes"] = GroupConfig(False, 0.05)
            holder.replace(replace(holder.current, groups=groups))
            await _until(lambda: _processes(store) == [])
        finally:
            task.cancel()
            sampler.close()

    asyncio.run(scenario())
