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

# A series' whole attribute tuple, kept from one sample to the next of the same (device, group)
# while the device's identity and workload-source attributes stay the same: a new sample
# rebuilds only value and time, and hands the exporters the same tuple object as before (the
# /metrics page keeps a series' labels by it: prometheus/otel_scheme.py). Only the last
# sample's series are held (a gone process's tuple goes with the next sample). Looked up by
# the reading's own attribute tuple as an object (backends and attribution hand the same one
# every read, and a tuple's hash is not cached: hashing a process's attributes each cycle
# cost as much as building them); the entry holds that object, so its id is not reused while
# it is kept.
_Known = dict[tuple[str, int], tuple[Attributes, Attributes]]
_attributes: dict[tuple[str, str], tuple[DeviceIdentity, Attributes, _Known]] = {}


def _series_attributes(device: DeviceSnapshot, metric: str, own: Attributes,
                       extra: Attributes) -> Attributes:
    """A reading's whole attribute tuple: the device's (those the metric takes), then its own."""
    if not metric.startswith("hw."):
        return (*device.identity.attributes(), *extra, *own)
    if metric.startswith("hw.fan."):
        return (*device.identity.fan_attributes(), *own)
    # Only the conventional attributes the metric lists (model/semconv.py).
    dropped = dropped_device_attributes(metric)
    return (*(a for a in (*device.identity.series_attributes(), *extra) if a[0] not in dropped),
            *own)


def _device_points(device: DeviceSnapshot, readings: Iterable[Reading], time_ns: int,
                   extra: Attributes, group: str) -> list[tuple[str, SeriesPoint]]:
    slot = (device.identity.uuid, group)
    held = _attributes.get(slot)
    known: _Known = {} if held is None or held[0] is not device.identity or held[1] != extra \
        else held[2]
    used: _Known = {}
    starts = device.counter_starts
    out = []
    for reading in readings:
        metric, own = reading.metric, reading.attributes
        if not carried(metric, reading.value, own):
            continue  # a value that cannot be read (or carried) is absent, never NaN
        key = (metric, id(own))
        held_series = known.get(key)
        if held_series is not None and held_series[0] is own:
            attributes = held_series[1]
        else:
            attributes = _series_attributes(device, metric, own, extra)
            held_series = (own, attributes)
        used[key] = held_series
        start = (starts.get((metric, own), device.start_time_ns) if starts
                 else device.start_time_ns)
        # The device's own time of the value where it gave one (never before the series'
        # start: a value cached since before the agent started is dated at the start).
        at = max(reading.time_ns, start) if reading.time_ns else time_ns
        out.append((metric, SeriesPoint(attributes, start, at, reading.value)))
    if len(_attributes) >= MAX_KEPT and slot not in _attributes:
        _attributes.clear()
    _attributes[slot] = (device.identity, extra, used)
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
    runs = _runs(_device_points(device, sample.readings, sample.time_ns, extra, sample.group))
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
        for metric, run in _runs(
                _device_points(device, now, snapshot.taken_ns, extra, "")).items():
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
