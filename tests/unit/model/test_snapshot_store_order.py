"""``SnapshotStore`` keeps its devices' order between snapshots (sorted again only when a device
comes, goes or changes identity): every snapshot must list the devices as sorting them afresh
does, each joined with its processes, over puts, removals and identity changes."""

from __future__ import annotations

import random
from dataclasses import replace
from types import MappingProxyType

from gpu_otel_agent.model.snapshot import (
    DeviceIdentity,
    DevicePartition,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    Reading,
    SnapshotStore,
)


def _identity(index: int, partition: int | None = None) -> DeviceIdentity:
    parent = f"GPU-{index}"
    if partition is None:
        return DeviceIdentity(parent, index, "nvidia", "H100", f"0000:{index:02x}:00.0")
    return DeviceIdentity(f"MIG-{index}-{partition}", index, "nvidia", "H100",
                          f"0000:{index:02x}:00.0", DevicePartition(parent, "mig", "1g.10gb"))


def _reference(devices: dict[str, DeviceSnapshot], processes: dict[str, GroupSample],
               ) -> tuple[DeviceSnapshot, ...]:
    """What a snapshot lists: every device sorted afresh, its processes joined with replace."""
    ordered = sorted(devices.values(), key=lambda d: d.identity.order)
    return tuple(
        replace(d, samples=MappingProxyType({**d.samples, processes[d.identity.uuid].group:
                                             processes[d.identity.uuid]}))
        if d.identity.uuid in processes else d for d in ordered)


def test_snapshots_list_devices_as_sorting_afresh_does() -> None:
    rng = random.Random(41)
    store = SnapshotStore()
    devices: dict[str, DeviceSnapshot] = {}
    processes: dict[str, GroupSample] = {}
    identities = [_identity(i) for i in (3, 0, 7, 1)] + [_identity(0, 1), _identity(3, 2)]
    for step in range(400):
        action = rng.random()
        identity = rng.choice(identities)
        uuid = identity.uuid
        if action < 0.5:  # a new sample of a device (or its first)
            sample = GroupSample("fast", (Reading("hw.power", float(step)),), step)
            device = DeviceSnapshot(identity, HealthState.OK, 1).with_sample(sample)
            store.put(device)
            devices[uuid] = device
        elif action < 0.65:  # the same UUID found again at another index (a new identity)
            moved = replace(identity, index=rng.randrange(10))
            device = DeviceSnapshot(moved, HealthState.OK, 2)
            store.put(device)
            devices[uuid] = device
        elif action < 0.8:  # attribution publishes or withdraws processes
            sample_or_none = (GroupSample("processes", (Reading("x", step),), step)
                              if rng.random() < 0.7 else None)
            store.put_processes(uuid, sample_or_none)
            if sample_or_none is None:
                processes.pop(uuid, None)
            else:
                processes[uuid] = sample_or_none
        elif action < 0.9:  # a partition destroyed
            store.remove(uuid)
            devices.pop(uuid, None)
            processes.pop(uuid, None)
        got = store.current(step).devices
        expected = _reference(devices, processes)
        assert [d.identity for d in got] == [d.identity for d in expected]
        assert got == expected
        assert store.devices() == got
