"""The data points a snapshot stands for, grouped by metric: what every encoder writes out.

This is where the device attributes are attached, ``hw.status`` is derived from the device's
health, and unreadable (non-finite) values are dropped — once, for every exporter.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from gpu_otel_agent.model.snapshot import (
    Attributes,
    DeviceIdentity,
    DeviceOverlay,
    DeviceSnapshot,
    GroupSample,
    HealthState,
    NodeSnapshot,
    Reading,
    worst,
)


class SeriesPoint(NamedTuple):
    """A tuple, not a dataclass: hundreds are made per export, and a frozen dataclass's
    ``__init__`` (``object.__setattr__`` per field) cost five times as much to build."""

    attributes: Attributes
    start_time_ns: int  # start of the cumulative counter (used for sums)
    time_ns: int
    value: float | int


def status_readings(
    device: DeviceSnapshot, overlay: DeviceOverlay | None = None
) -> tuple[Reading, ...]:
    """``hw.status``: the worse of the sampler's view and the health engine's."""
    health = device.health if overlay is None else worst(device.health, overlay.health)
    return tuple(
        Reading("hw.status", int(state is health), (("hw.state", state.value),))
        for state in HealthState
    )


# A device's samples mostly outlive an export (the slow group's for 30 s, the processes'
# for 5 s, against a 1 s export): their points are kept with the sample they came from, and
# rebuilt only when the sample, the device's identity, its counter starts or its workload
# source's attributes change. One
# entry per (device, group), the latest: nothing older is held. Shared by every exporter's
# thread (one dict operation each; a lost race rebuilds the points once more).
class _Kept(NamedTuple):
    sample: GroupSample
    identity: DeviceIdentity
    counter_starts: Mapping[tuple[str, Attributes], int]
    start_time_ns: int
    extra: Attributes
    points: list[tuple[str, SeriesPoint]]


_latest: dict[tuple[str, str], _Kept] = {}
MAX_KEPT = 4096  # (device, group) pairs; cleared past this (partitions come and go)


def _device_points(device: DeviceSnapshot, readings: Iterable[Reading], time_ns: int,
                   extra: Attributes) -> list[tuple[str, SeriesPoint]]:
    identity = (*device.identity.attributes(), *extra)
    with_type = (*device.identity.series_attributes(), *extra)
    starts = device.counter_starts
    out = []
    for reading in readings:
        if not math.isfinite(reading.value):
            continue  # a value that cannot be read is absent, never NaN
        base = with_type if reading.metric.startswith("hw.") else identity
        start = (starts.get((reading.metric, reading.attributes), device.start_time_ns)
                 if starts else device.start_time_ns)
        out.append((reading.metric,
                    SeriesPoint((*base, *reading.attributes), start, time_ns, reading.value)))
    return out


def _sample_points(device: DeviceSnapshot, sample: GroupSample,
                   extra: Attributes) -> list[tuple[str, SeriesPoint]]:
    slot = (device.identity.uuid, sample.group)
    kept = _latest.get(slot)
    if (kept is not None and kept.sample is sample and kept.identity is device.identity
            and kept.counter_starts is device.counter_starts
            and kept.start_time_ns == device.start_time_ns and kept.extra == extra):
        return kept.points
    points = _device_points(device, sample.readings, sample.time_ns, extra)
    if len(_latest) >= MAX_KEPT:
        _latest.clear()
    _latest[slot] = _Kept(sample, device.identity, device.counter_starts, device.start_time_ns,
                          extra, points)
    return points


def series(snapshot: NodeSnapshot) -> dict[str, list[SeriesPoint]]:
    """Metric name -> its points, names sorted, points in device order."""
    points: dict[str, list[SeriesPoint]] = defaultdict(list)
    for device in snapshot.devices:
        # Attributes a workload source gives the device (a DRA claim's driver/pool/device).
        extra = snapshot.device_attributes.get(device.identity.uuid, ())
        overlay = snapshot.overlays.get(device.identity.uuid)
        now = list(status_readings(device, overlay))
        if overlay is not None:
            now.extend(overlay.readings)
        for group in device.samples.values():
            for metric, point in _sample_points(device, group, extra):
                points[metric].append(point)
        for metric, point in _device_points(device, now, snapshot.taken_ns, extra):
            points[metric].append(point)
    # Self-telemetry and node-level samples: their readings carry their own attributes.
    samples = (snapshot.agent, *snapshot.node) if snapshot.agent else snapshot.node
    for sample in samples:
        for reading in sample.readings:
            if math.isfinite(reading.value):
                points[reading.metric].append(SeriesPoint(
                    reading.attributes, sample.start_time_ns, sample.time_ns, reading.value))
    return dict(sorted(points.items()))
