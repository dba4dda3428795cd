"""The data points a snapshot stands for, grouped by metric: what every encoder writes out.

This is where the device attributes are attached, ``hw.status`` is derived from the device's
health, and unreadable (non-finite) values are dropped — once, for every exporter.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import NamedTuple

from gpu_otel_agent.model.snapshot import (
    Attributes,
    DeviceOverlay,
    DeviceSnapshot,
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


def series(snapshot: NodeSnapshot) -> dict[str, list[SeriesPoint]]:
    """Metric name -> its points, names sorted, points in device order."""
    points: dict[str, list[SeriesPoint]] = defaultdict(list)
    for device in snapshot.devices:
        identity = device.identity.attributes()
        with_type = device.identity.series_attributes()
        timed = [(r, s.time_ns) for s in device.samples.values() for r in s.readings]
        overlay = snapshot.overlays.get(device.identity.uuid)
        timed.extend((r, snapshot.taken_ns) for r in status_readings(device, overlay))
        if overlay is not None:
            timed.extend((r, snapshot.taken_ns) for r in overlay.readings)
        starts = device.counter_starts
        for reading, time_ns in timed:
            if not math.isfinite(reading.value):
                continue  # a value that cannot be read is absent, never NaN
            base = with_type if reading.metric.startswith("hw.") else identity
            start = (starts.get((reading.metric, reading.attributes), device.start_time_ns)
                     if starts else device.start_time_ns)
            points[reading.metric].append(
                SeriesPoint((*base, *reading.attributes), start, time_ns, reading.value)
            )
    # Self-telemetry and node-level samples: their readings carry their own attributes.
    samples = (snapshot.agent, *snapshot.node) if snapshot.agent else snapshot.node
    for sample in samples:
        for reading in sample.readings:
            if math.isfinite(reading.value):
                points[reading.metric].append(SeriesPoint(
                    reading.attributes, sample.start_time_ns, sample.time_ns, reading.value))
    return dict(sorted(points.items()))
