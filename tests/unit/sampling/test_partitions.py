"""A device is a tree: partitions sampled on the parent's thread, appearing and vanishing with
the parent's configuration, exported with ``hw.parent`` (in-memory devices; the core knows no
vendor)."""

from __future__ import annotations

import asyncio
import threading
from dataclasses import replace

import pytest

from gpu_otel_agent.backends.protocol import Device, DeviceLost, PartitionGone
from gpu_otel_agent.config.holder import ConfigHolder
from gpu_otel_agent.config.load import load
from gpu_otel_agent.config.schema import GroupConfig
from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DevicePartition,
    HealthState,
    Reading,
    SnapshotStore,
)
from gpu_otel_agent.sampling.sampler import DeviceSampler
from tests.polling import until as _until


class Child:
    def __init__(self, parent: str, gi: int, memory: int) -> None:
        self.identity = DeviceIdentity(
            f"MIG-{parent}-{gi}", 0, "test", "model", "bus0",
            DevicePartition(parent, "test", f"{gi}g", (("test.instance", gi),)))
        self.current_call: str | None = None
        self.memory = memory
        self.threads: set[str] = set()
        self.destroyed = False

    def probe(self) -> frozenset[str]:
        return frozenset({"fast"})

    def read(self, group: str) -> tuple[Reading, ...]:
        self.threads.add(threading.current_thread().name)
        if self.destroyed:
            raise PartitionGone(self.identity.uuid)
        return (Reading("hw.gpu.memory.limit", self.memory),)


class Parent:
    def __init__(self) -> None:
        self.identity = DeviceIdentity("GPU-P", 0, "test", "model", "bus0")
        self.current_call: str | None = None
        self.children: list[Child] = []
        self.gate = threading.Event()
        self.gate.set()
        self.lost = False
        self.scans = 0

    def probe(self) -> frozenset[str]:
        return frozenset({"fast"})

    def read(self, group: str) -> tuple[Reading, ...]:
        self.current_call = "slowCall"
        self.gate.wait()
        self.current_call = None
        if self.lost:
            raise DeviceLost("gone")
        return (Reading("hw.power", 100.0),)

    def partitions(self) -> tuple[Device, ...]:
        self.scans += 1
        return tuple(c for c in self.children if not c.destroyed)


def _config() -> ConfigHolder:
    base = load(None, environ={})
    groups = {"fast": GroupConfig(True, 0.05), "slow": GroupConfig(True, 0.3)}
    return ConfigHolder(replace(base, groups=groups, call_timeout=0.3,
                                lost_reprobe_interval=0.1))


def _uuids(store: SnapshotStore) -> list[str]:
    return [d.identity.uuid for d in store.devices()]


def test_partitions_are_sampled_on_the_parents_thread_and_follow_reconfiguration() -> None:
    async def scenario() -> None:
        store = SnapshotStore()
        parent = Parent()
        parent.children = [Child("GPU-P", 1, 40), Child("GPU-P", 2, 10)]
        sampler = DeviceSampler(parent, store, _config())
        task = asyncio.create_task(sampler.run())
        await _until(lambda: all(d.samples for d in store.devices()) and len(_uuids(store)) == 3)
        # Parent first, then its partitions; each partition's readings are its own.
        assert _uuids(store) == ["GPU-P", "MIG-GPU-P-1", "MIG-GPU-P-2"]
        limits = {d.identity.uuid: d.samples["fast"].readings[0].value for d in store.devices()
                  if d.identity.partition is not None}
        assert limits == {"MIG-GPU-P-1": 40, "MIG-GPU-P-2": 10}
        assert {t for c in parent.children for t in c.threads} == {"gpu-0"}
        assert store.covers(1)

        # Destroy one, create another: the destroyed one goes at once, the new one appears.
        parent.children[1].destroyed = True
        parent.children.append(Child("GPU-P", 3, 20))
        await _until(lambda: _uuids(store) == ["GPU-P", "MIG-GPU-P-1", "MIG-GPU-P-3"]
                     and all(d.samples for d in store.devices()))
        errors, cycles = sampler.stats.errors, sampler.stats.cycles
        # Counted over the sampler's own cycles (ten), not a window a loaded machine may
        # fill with fewer.
        await _until(lambda: sampler.stats.cycles >= cycles + 10)
        assert sampler.stats.errors == errors  # no burst of errors from the destroyed one

        # A hung parent takes its partitions' readings with it; they come back together.
        parent.gate.clear()
        await _until(lambda: all(d.health is HealthState.DEGRADED for d in store.devices()))
        assert not any(d.samples for d in store.devices())
        parent.gate.set()
        await _until(lambda: all(d.health is HealthState.OK and d.samples
                                 for d in store.devices()))
        task.cancel()
        sampler.close()

    asyncio.run(scenario())


def test_partition_series_carry_the_parent() -> None:
    child = Child("GPU-P", 1, 40)
    attributes = dict(child.identity.series_attributes())
    assert attributes["hw.id"] == "MIG-GPU-P-1"
    assert attributes["hw.parent"] == "GPU-P"
    assert attributes["hw.type"] == "gpu"
    assert attributes["test.instance"] == 1
    assert "hw.parent" not in dict(Parent().identity.attributes())


def test_partition_attributes_cannot_shadow_the_device_ones() -> None:
    with pytest.raises(ValueError, match=r"hw\.id"):
        DevicePartition("GPU-P", "mig", "1g", (("hw.id", "x"),))
    with pytest.raises(ValueError, match="parent"):
        DevicePartition("", "mig", "1g")


def test_an_unpartitioned_devices_job_gives_what_read_tree_gives() -> None:
    """``read_own`` (the job of a device without partitions between scans) equals
    ``read_tree`` with no partitions and no enumeration: the device's read, or None when the
    device does not read the group itself; an error of the read propagates as it does there."""
    from functools import partial

    from gpu_otel_agent.sampling.partitions import read_own, read_tree

    device = Child("GPU-P", 1, 0)
    for memory in (0, 1, 2**40, 7):
        device.memory = memory
        for own in (True, False):
            tree = read_tree(device, lambda d: d.read("fast"), parent_reads=own, partitions={},
                             enumerate_known=None, serves=lambda uuid, probed: True)
            quick = read_own(partial(device.read, "fast") if own else None)
            assert quick == tree
            assert dict(quick.partitions) == {} and quick.gone == frozenset()
            assert quick.parent == ((Reading("hw.gpu.memory.limit", memory),) if own else None)
    device.destroyed = True
    with pytest.raises(PartitionGone):
        read_own(partial(device.read, "fast"))
