"""The JSON documents of the local endpoint, built from what the agent already holds.

Nothing here calls a GPU library: the snapshot view reads :class:`SnapshotStore` (the samplers'
latest readings and each device's health as the health board decided it), the event view reads
the :class:`EventRing`.
Processes come from the per-process readings the attribution already made (``gpu.process.*``),
so a client sees the same container, pod, namespace and Slurm job as the exported series.
"""

from __future__ import annotations

from typing import Any

from gpu_otel_agent.gpu_health.events import EventValue
from gpu_otel_agent.local.recent_events import Recent
from gpu_otel_agent.model.snapshot import (
    Attributes,
    DeviceSnapshot,
    NodeSnapshot,
    Reading,
)

Json = dict[str, Any]
PROCESS_METRIC_PREFIX = "gpu.process."
CONTAINER_METRIC_PREFIX = "gpu.container."
# The workload attributes of telemetry.md, under the short names a client shows.
_WORKLOAD_KEYS = {
    "container.id": "container_id",
    "k8s.container.name": "container",
    "k8s.pod.name": "pod",
    "k8s.pod.uid": "pod_uid",
    "k8s.namespace.name": "namespace",
    "slurm.job.id": "slurm_job",
}


def _reading(reading: Reading) -> Json:
    return {"metric": reading.metric, "value": reading.value,
            "attributes": dict(reading.attributes)}


def _processes(readings: list[Reading]) -> list[Json]:
    """One entry per PID from the ``gpu.process.*`` readings (capped as the series are)."""
    by_pid: dict[int, Json] = {}
    for reading in readings:
        attributes = dict(reading.attributes)
        pid = attributes.get("process.pid")
        if not isinstance(pid, int):
            continue
        entry = by_pid.setdefault(pid, {
            "pid": pid, "executable": str(attributes.get("process.executable.name", "")),
            "memory_bytes": None, "utilization": None,
            **{short: attributes.get(key) for key, short in _WORKLOAD_KEYS.items()},
        })
        if reading.metric == "gpu.process.memory.usage":
            entry["memory_bytes"] = reading.value
        elif (reading.metric == "gpu.process.utilization"
              and attributes.get("hw.gpu.task", "general") == "general"):
            entry["utilization"] = reading.value
    return sorted(by_pid.values(), key=lambda p: (-(p["memory_bytes"] or 0), p["pid"]))


def device_view(device: DeviceSnapshot, snapshot: NodeSnapshot) -> Json:
    identity = device.identity
    health = snapshot.health_of(identity.uuid)
    readings = [r for s in sorted(device.samples.values(), key=lambda s: s.group)
                for r in s.readings]
    readings.extend(health.readings)
    own = [r for r in readings if not r.metric.startswith((PROCESS_METRIC_PREFIX,
                                                            CONTAINER_METRIC_PREFIX))]
    partition = identity.partition
    return {
        "uuid": identity.uuid,
        "index": identity.index,
        "vendor": identity.vendor,
        "model": identity.model,
        "pci_bus_id": identity.pci_bus_id,
        "parent": identity.parent_uuid,
        "partition": None if partition is None else {
            "kind": partition.kind, "profile": partition.profile,
            "attributes": dict(partition.attributes)},
        "health": health.state.value,
        "reason": health.reason,
        "sampled_ns": max((s.time_ns for s in device.samples.values()), default=None),
        "readings": [_reading(r) for r in own],
        "processes": _processes(readings),
    }


def snapshot_view(snapshot: NodeSnapshot, agent: Json) -> Json:
    """Every device (partitions after their parent) with readings, health and processes."""
    return {
        "agent": agent,
        "taken_ns": snapshot.taken_ns,
        "devices": [device_view(d, snapshot) for d in snapshot.devices],
    }


def _value(value: EventValue) -> Any:
    return list(value) if isinstance(value, tuple) else value


def _attributes(attributes: Attributes | tuple[tuple[str, EventValue], ...]) -> Json:
    return {key: _value(value) for key, value in attributes}


def events_view(recent: Recent) -> Json:
    return {
        "last_seq": recent.last_seq,
        "missed": recent.missed,
        "events": [{"seq": n.seq, "name": n.event.name, "time_ns": n.event.time_ns,
                    "severity": n.event.severity.text, "body": n.event.body,
                    "attributes": _attributes(n.event.attributes),
                    "workloads": [_attributes(w) for w in n.event.workloads]}
                   for n in recent.events],
    }
