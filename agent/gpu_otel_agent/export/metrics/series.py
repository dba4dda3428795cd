"""The data points a snapshot stands for, grouped by metric: what every encoder writes out.

This is where the device attributes are attached, the device's health is written out (its
``hw.status`` and the health engine's series, as ``gpu_health/verdict.py`` decided them), and
unreadable (non-finite) values are dropped — once, for every exporter — and so are readings
the wire cannot carry (an integer beyond 64 signed bits, in the value or an attribute:
``wire_range``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from gpu_otel_agent.export.metrics.wire_range import carried
from gpu_otel_agent.model.semconv import dropped_device_attributes
from gpu_otel_agent.model.snapshot import (
    Attributes,
    DeviceIdentity,
    DeviceSnapshot,
    GroupSample,
    NodeSnapshot,
    Reading,
)


class SeriesPoint(NamedTuple):
    """A tuple, not a dataclass: hundreds are made per export, and a frozen dataclass's
    ``__init__`` (``object.__setattr__`` per field) cost five times as much to build."""

    attributes: Attributes
    start_time_ns: int  # start of the cumulative counter (used for sums)
    time_ns: int
    value: float | int


Run = list[SeriesPoint]  # one metric's points from one sample


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
    runs: dict[str, Run]


_latest: dict[tuple[str, str], _Kept] = {}
MAX_KEPT = 4096  # (device, group) pairs; cleared past this (partitions come and go)


def _device_points(device: DeviceSnapshot, readings: Iterable[Reading], time_ns: int,
                   extra: Attributes) -> list[tuple[str, SeriesPoint]]:
    identity = (*device.identity.attributes(), *extra)
    with_type = (*device.identity.series_attributes(), *extra)
    hw_bases: dict[frozenset[str], Attributes] = {}
    starts = device.counter_starts
    out = []
    for reading in readings:
        metric = reading.metric
        if not carried(metric, reading.value, reading.attributes):
            continue  # a value that cannot be read is absent, never NaN
        if not metric.startswith("hw."):
            base = identity
        elif metric.startswith("hw.fan."):
            base = device.identity.fan_attributes()
        else:
            # Only the conventional attributes the metric lists (model/semconv.py).
            dropped = dropped_device_attributes(metric)
            cached = hw_bases.get(dropped)
            if cached is None:
                cached = hw_bases[dropped] = tuple(a for a in with_type if a[0] not in dropped)
            base = cached
        start = (starts.get((reading.metric, reading.attributes), device.start_time_ns)
                 if starts else device.start_time_ns)
        # The device's own time of the value where it gave one (never before the series'
        # start: a value cached since before the agent started is dated at the start).
        at = max(reading.time_ns, start) if reading.time_ns else time_ns
        out.append((reading.metric,
                    SeriesPoint((*base, *reading.attributes), start, at, reading.value)))
    return out


def _runs(points: Iterable[tuple[str, SeriesPoint]]) -> dict[str, Run]:
    """Points of one sample, by metric, in the order they came."""
    runs: dict[str, Run] = {}
    for metric, point in points:
        run = runs.get(metric)
        if run is None:
            runs[metric] = [point]
        else:
            run.append(point)
    return runs


def _sample_runs(device: DeviceSnapshot, sample: GroupSample,
                 extra: Attributes) -> dict[str, Run]:
    slot = (device.identity.uuid, sample.group)
    kept = _latest.get(slot)
    if (kept is not None and kept.sample is sample and kept.identity is device.identity
            and kept.counter_starts is device.counter_starts
            and kept.start_time_ns == device.start_time_ns and kept.extra == extra):
        return kept.runs
    runs = _runs(_device_points(device, sample.readings, sample.time_ns, extra))
    if len(_latest) >= MAX_KEPT:
        _latest.clear()
    _latest[slot] = _Kept(sample, device.identity, device.counter_starts, device.start_time_ns,
                          extra, runs)
    return runs


def series_runs(snapshot: NodeSnapshot) -> dict[str, list[Run]]:
    """Metric name -> its points in runs, names sorted, runs in device order.

    A run is the points of one metric from one sample. A run of a sample that has not changed
    since the last call is the same list object as then (never modified once returned), so an
    encoder may keep what it made of it: at a 1 s export, the slow, gpm and processes groups'
    points are the same for 30, 10 and 5 exports in a row."""
    runs: dict[str, list[Run]] = defaultdict(list)
    for device in snapshot.devices:
        # Attributes a workload source gives the device (a DRA claim's driver/pool/device).
        extra = snapshot.device_attributes.get(device.identity.uuid, ())
        health = snapshot.health_of(device.identity.uuid)
        now = (*health.status, *health.readings)
        for group in device.samples.values():
            for metric, run in _sample_runs(device, group, extra).items():
                runs[metric].append(run)
        for metric, run in _runs(_device_points(device, now, snapshot.taken_ns, extra)).items():
            runs[metric].append(run)
    # Self-telemetry and node-level samples: their readings carry their own attributes.
    samples = (snapshot.agent, *snapshot.node) if snapshot.agent else snapshot.node
    for sample in samples:
        for metric, run in _runs(
                (reading.metric, SeriesPoint(reading.attributes, sample.start_time_ns,
                                             sample.time_ns, reading.value))
                for reading in sample.readings
                if carried(reading.metric, reading.value, reading.attributes)).items():
            runs[metric].append(run)
    return dict(sorted(runs.items()))


def series(snapshot: NodeSnapshot) -> dict[str, list[SeriesPoint]]:
    """Metric name -> its points, names sorted, points in device order."""
    return {metric: [point for run in runs for point in run]
            for metric, runs in series_runs(snapshot).items()}
