"""``SnapshotStore`` keeps its devices' order between snapshots (sorted again only when a device
comes, goes or changes identity) and its health, node samples and device attributes until one
changes: every snapshot must list the devices as sorting them afresh does, each joined with its
processes, and carry what was last put, over puts, removals and identity changes."""

from __future__ import annotations

import random
from dataclasses import replace
from types import MappingProxyType

from gpu_otel_agent.model.snapshot import (
    AgentSample,
    DeviceHealth,
    DeviceIdentity,
    DevicePartition,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    Reading,
    SnapshotStore,
    status_readings,
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
    health: dict[str, DeviceHealth] = {}
    node: dict[str, tuple[AgentSample, ...]] = {}
    attributes: dict[str, tuple[tuple[str, str | int | float | bool], ...]] = {}
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
        elif action < 0.85:  # a partition destroyed
            store.remove(uuid)
            for held in (devices, processes, health, attributes):
                held.pop(uuid, None)
        elif action < 0.9:  # a verdict
            state = rng.choice(list(HealthState))
            health[uuid] = DeviceHealth(state, status_readings(state), f"step {step}")
            store.put_health(uuid, health[uuid])
        elif action < 0.95:  # attribution's device attributes (empty: none)
            claimed = (("k8s.pod.name", f"pod-{step}"),) if rng.random() < 0.7 else ()
            store.put_device_attributes(uuid, claimed)
            if claimed:
                attributes[uuid] = claimed
            else:
                attributes.pop(uuid, None)
        else:  # a node plugin's samples
            source = rng.choice(["ebpf", "other"])
            node[source] = (AgentSample((Reading("y", step),), 1, step),) * rng.randrange(3)
            store.put_node_samples(source, node[source])
        got = store.current(step).devices
        expected = _reference(devices, processes)
        assert [d.identity for d in got] == [d.identity for d in expected]
        assert got == expected
        assert store.devices() == got
        snapshot = store.current(step)
        assert dict(snapshot.health) == health
        assert dict(snapshot.device_attributes) == attributes
        assert snapshot.node == tuple(s for _, samples in sorted(node.items()) for s in samples)
