"""The data points a snapshot stands for, grouped by metric: what every encoder writes out.

This is where the device attributes are attached, the device's health is written out (its
``hw.status`` and the health engine's series, as ``gpu_health/verdict.py`` decided them), and
unreadable (non-finite) values are dropped — once, for every exporter — and so are readings
the wire cannot carry (an integer beyond 64 signed bits, in the value or an attribute:
``wire_range``).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter, itemgetter, not_
from typing import Any, NamedTuple

from gpu_otel_agent.export.metrics.wire_range import INT64_MAX, INT64_MIN, carried
from gpu_otel_agent.model.semconv import dropped_device_attributes
from gpu_otel_agent.model.snapshot import (
    AgentSample,
    Attributes,
    DeviceIdentity,
    DeviceSnapshot,
    NodeSnapshot,
    Reading,
    ReadingKeys,
)


class SeriesPoint(NamedTuple):
    """A tuple, not a dataclass: hundreds are made per export, and a frozen dataclass's
    ``__init__`` (``object.__setattr__`` per field) cost five times as much to build."""

    attributes: Attributes
    start_time_ns: int  # start of the cumulative counter (used for sums)
    time_ns: int
    value: float | int


Points = list[SeriesPoint]


@dataclass(frozen=True, slots=True, eq=False)
class RunShape:
    """What one metric's points of a (device, group) keep from sample to sample while the
    sample's shape holds (``_SampleShape``): each point's series, as (attributes, counter
    start), and whether its value is an integer. The same object while it holds (compared
    by identity), so an encoder or ``SeriesEnds`` may keep what it made of it (encoded
    bytes, the series set)."""

    # Each point's series as two columns, not a pair per point: a tuple of two per series
    # cost 0.5 MiB at 8 x 2,048 (8,600 series) for what two tuples of references hold.
    attributes: tuple[Attributes, ...]
    starts: tuple[int, ...]  # counter starts
    ints: tuple[bool, ...]  # the value is an int, not a float

    @property
    def series(self) -> tuple[tuple[Attributes, int], ...]:
        """Each point's series as (attributes, counter start)."""
        return tuple(zip(self.attributes, self.starts, strict=True))


class ShapedRun:
    """A run of a sample of a known shape: the shape's series with this sample's values and
    times, and no ``SeriesPoint`` built unless someone iterates it (the OTLP encoder patches
    the values into bytes it keeps per shape; /metrics and the SDK path iterate).

    A class with slots, not a frozen dataclass, for the reason ``SeriesPoint`` is a tuple:
    one is made per metric per device per export, and a frozen dataclass's ``__init__``
    cost three times as much. Never changed once made, but for the points it stands for,
    built at the first iteration and kept with it: a run of a sample kept for many scrapes
    (the slow group's for 30 s) is made into points once, as the general path makes them
    (two threads iterating at once only build them twice)."""

    __slots__ = ("_points", "shape", "times", "values")

    def __init__(self, shape: RunShape, values: Sequence[float | int],
                 times: Sequence[int]) -> None:
        self.shape = shape
        self.values = values
        self.times = times
        self._points: Points | None = None

    def seed(self, points: Points) -> None:
        """The points, where the general path has just built them (the shape's first
        sample): the same series, times and values, not built again."""
        self._points = points

    def __iter__(self) -> Iterator[SeriesPoint]:
        points = self._points
        if points is None:
            shape = self.shape
            points = self._points = list(map(
                SeriesPoint, shape.attributes, shape.starts, self.times, self.values))
        return iter(points)

    def __len__(self) -> int:
        return len(self.values)


Run = Points | ShapedRun  # one metric's points from one sample
_SHAPE = attrgetter("shape")


class SampleRuns:
    """One sample's runs by metric. For a sample of a known shape (``shape``) also its
    values and times in reading order, from which the runs (a ``ShapedRun`` per metric) are
    picked only when first asked for: an encoder that keeps the sample's metric templates
    fills them from ``values`` and ``times`` directly (``ProtoEncoder._refill``), so a steady
    export builds no ``ShapedRun`` and picks no tuple per (device, metric) (11 per GPU's
    fast sample, every export). Never changed once made but for the runs, built at the
    first ask and kept (two threads asking at once build them twice: another dict, equal)."""

    __slots__ = ("_runs", "shape", "times", "values")

    def __init__(self, runs: dict[str, Run] | None, shape: _SampleShape | None = None,
                 values: Sequence[Any] = (), times: Sequence[int] = ()) -> None:
        self._runs = runs
        self.shape = shape  # None: ``runs`` are all there is (given, not picked)
        self.values = values
        self.times = times

    @property
    def runs(self) -> dict[str, Run]:
        runs = self._runs
        if runs is None:
            shape, values, times = self.shape, self.values, self.times
            assert shape is not None  # made with a shape where not given runs
            runs = self._runs = {metric: ShapedRun(run, pick(values), pick(times))
                                 for metric, run, pick in shape.runs}
        return runs

    def run(self, metric: str) -> Run:
        """``runs[metric]``, without building the others' where they are not built yet (an
        encoder's metric written from chunks, beside a sample's metrics of templates): a
        ``ShapedRun`` of its own then, equal to the one ``runs`` would hold."""
        runs = self._runs
        if runs is not None:
            return runs[metric]
        shape = self.shape
        assert shape is not None  # made with a shape where not given runs
        for name, run, pick in shape.runs:
            if name == metric:
                return ShapedRun(run, pick(self.values), pick(self.times))
        raise KeyError(metric)

    def picker(self, metric: str) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
        """Picks ``metric``'s values (or times) from ``values`` (``times``), in order."""
        assert self.shape is not None
        return next(pick for name, _, pick in self.shape.runs if name == metric)

    def places(self) -> dict[str, list[int]]:
        """Where each metric's values are in ``values``, in the order of its run's points."""
        assert self.shape is not None
        found: dict[str, list[int]] = {}
        for at, name in enumerate(self.shape.metrics):
            found.setdefault(name, []).append(at)
        return found


_RUNS = attrgetter("runs")


def run_shapes(runs: list[Run]) -> list[RunShape] | None:
    """Each run's shape, in a C call; None when a run is of no known shape (a list). In a
    steady state every run is shaped: the fast group's, and the other groups' from their
    second sample on; runs of the same shapes have the same series and sizes."""
    try:
        return list(map(_SHAPE, runs))
    except AttributeError:  # a list of points
        return None


# A device's samples mostly outlive an export (the slow group's for 30 s, the processes'
# for 5 s, against a 1 s export): their points are kept with the sample they came from, and
# rebuilt only when the sample, the device's identity, its counter starts or its workload
# source's attributes change. One
# entry per (device, group), the latest: nothing older is held. Shared by every exporter's
# thread (one dict operation each; a lost race rebuilds the points once more).
class _Kept(NamedTuple):
    sample: object  # the GroupSample (or the export's health readings)
    readings: Sequence[Reading]
    identity: DeviceIdentity
    counter_starts: Mapping[tuple[str, Attributes], int]
    start_time_ns: int
    extra: Attributes
    slot: SampleRuns
    shape: _SampleShape | None
    # What ``slot``'s runs are made of, for ``series_slots``: the shape when they are its
    # ``ShapedRun``s (a new sample of it has the same metrics and ``RunShape``s), else the
    # runs dict itself (the same object only while the sample is).
    key: object


_METRIC = attrgetter("metric")
_ATTRIBUTES = attrgetter("attributes")
_START = attrgetter("start_time_ns")
_OWN = attrgetter("attributes")
_VALUE = attrgetter("value")
_TIME = attrgetter("time_ns")
# The value types a shape takes, and whether they go as integers (a bool, or anything else,
# goes the general way: the SDK path refuses a bool where an int is due).
_KINDS = {int: True, float: False}


def _picker(indices: Sequence[int]) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A tuple of the items at ``indices`` in one C call (``itemgetter`` of one index
    returns the item itself, not a tuple of it)."""
    if len(indices) == 1:
        return itemgetter(slice(indices[0], indices[0] + 1))
    return itemgetter(*indices)


@dataclass(frozen=True, slots=True)
class _SampleShape:
    """What a (device, group)'s samples have in common while the device reads the same set:
    the readings' metrics, own attributes and value types, in order, and the runs built from
    them. The fast group is a new sample every second, but its shape is the last one's
    nearly always: a sample of the same shape gets its runs as ``ShapedRun`` (values and
    times picked in a few C calls) instead of a ``SeriesPoint`` and a few dict operations
    per reading. Held only while every reading of the sample was carried (none dropped)."""

    metrics: list[str]
    own: list[Attributes]
    types: list[type]
    starts: list[int]  # each reading's counter start
    untimed: list[bool]  # the readings that came without the device's time
    timed_starts: list[int]  # the counter starts of the others, 0 for those
    latest_start: int  # the latest of timed_starts
    untimed_only: bool  # no reading came with a time of its own (the processes group's)
    runs: tuple[tuple[str, RunShape, Callable[[Sequence[Any]], tuple[Any, ...]]], ...]
    ints: Callable[[Sequence[Any]], tuple[Any, ...]] | None  # the int values
    floats: Callable[[Sequence[Any]], tuple[Any, ...]] | None  # the float values


def _shape_of(readings: Sequence[Reading], runs: dict[str, Points]) -> _SampleShape | None:
    """The shape of a sample the general path just turned into ``runs``; None where a reading
    was dropped (not carried) or a value is of another type: those go the general way."""
    types = [type(reading.value) for reading in readings]
    if sum(map(len, runs.values())) != len(readings) or not all(t in _KINDS for t in types):
        return None
    metrics = list(map(_METRIC, readings))
    indices: dict[str, list[int]] = {}
    for i, metric in enumerate(metrics):
        indices.setdefault(metric, []).append(i)
    starts = [0] * len(readings)
    shapes = []
    for metric, points in runs.items():
        picks = indices[metric]
        for i, point in zip(picks, points, strict=True):
            starts[i] = point.start_time_ns
        shapes.append((metric, RunShape(tuple(map(_ATTRIBUTES, points)),
                                        tuple(map(_START, points)),
                                        tuple(_KINDS[types[i]] for i in picks)),
                       _picker(picks)))
    ints = [i for i, t in enumerate(types) if _KINDS[t]]
    floats = [i for i, t in enumerate(types) if not _KINDS[t]]
    untimed = [not reading.time_ns for reading in readings]
    timed_starts = [0 if no_time else start for no_time, start in zip(untimed, starts,
                                                                      strict=True)]
    return _SampleShape(metrics, list(map(_OWN, readings)), types, starts, untimed,
                        timed_starts, max(timed_starts, default=0), all(untimed),
                        tuple(shapes), _picker(ints) if ints else None,
                        _picker(floats) if floats else None)


def _fits(shape: _SampleShape, readings: Sequence[Reading], values: list[Any]) -> bool:
    """The sample is of ``shape``: the same metrics, own attributes (equal, mostly the same
    objects) and value types, in order, and every value carried, as ``wire_range.carried``
    would find it (else the general path decides, and drops or counts)."""
    if len(readings) != len(shape.metrics) or list(map(_METRIC, readings)) != shape.metrics \
            or list(map(_OWN, readings)) != shape.own:
        return False
    return _carries(shape, values)


def _carries(shape: _SampleShape, values: list[Any]) -> bool:
    """Values of a sample of ``shape``'s metrics and attributes fit it: the same value types,
    and every value carried (``_fits``)."""
    if list(map(type, values)) != shape.types:
        return False
    if shape.ints is not None:
        ints = shape.ints(values)
        if min(ints) < INT64_MIN or max(ints) > INT64_MAX:
            return False
    # Not finite somewhere: NaN and infinities carry into the sum (a sum of large finite
    # values that overflows only sends the sample the general way).
    return shape.floats is None or math.isfinite(sum(shape.floats(values)))


def _shaped_runs(shape: _SampleShape, readings: Sequence[Reading], time_ns: int, *,
                 checked: bool = False) -> SampleRuns | None:
    """The runs of a sample of ``shape`` (its values and times, the runs picked from them
    when asked for); None when it is of another (``_fits``).
    ``checked``: the readings are the very ones the shape was last found in (the health
    readings, the same objects while the health holds), only their time is new."""
    values = list(map(_VALUE, readings))
    if not checked and not _fits(shape, readings, values):
        return None
    if shape.untimed_only and not any(map(_TIME, readings)):
        # Still none with a time of its own: every point dated by the sample, as below
        # (one pass over the readings instead of four).
        return SampleRuns(None, shape, values, [time_ns] * len(values))
    times = list(map(_TIME, readings))
    # As _device_points dates a point: the device's time (never before the series' start)
    # where it gave one, else the sample's. Where the readings without a time are the
    # shape's (NVML's field values carry one, the other calls' readings not), in C calls:
    # the sample time for those (a time of 0 looked up as the key of {0: time_ns}), the
    # device time for the others (not found: itself), and only where one of these is before
    # a series' start, max(that, its start) (0 for those without). The times are the same
    # int objects as the readings' and the sample's: 0 + time and time + 0 made a new int
    # per point, held by the sample's runs (8,300 of them, 0.27 MiB, at 8 x 2,048).
    if list(map(not_, times)) == shape.untimed:
        times = list(map({0: time_ns}.get, times, times))
        if times and min(times) < shape.latest_start:
            times = list(map(max, times, shape.timed_starts))
    else:
        times = [max(at, start) if at else time_ns
                 for at, start in zip(times, shape.starts, strict=True)]
    return SampleRuns(None, shape, values, times)


def _redated(slot: SampleRuns, time_ns: int) -> SampleRuns:
    """The runs of a sample whose readings are the very ones ``slot`` was made of, and
    carry no time of their own (the health readings while the health holds: only the export's
    time is new): the same shape and values, every point dated ``time_ns``, as
    ``_shaped_runs`` would date them (no value read, no time computed per reading).
    ``slot`` is of the shape (``_Kept.key``)."""
    return SampleRuns(None, slot.shape, slot.values, [time_ns] * len(slot.values))


_latest: dict[tuple[str, str], _Kept] = {}
MAX_KEPT = 4096  # (device, group) pairs; cleared past this (partitions come and go)

# A series' whole attribute tuple, kept from one sample to the next of the same (device, group)
# while the device's identity and workload-source attributes stay the same: a new sample
# rebuilds only value and time, and hands the exporters the same tuple object as before (the
# /metrics page keeps a series' labels by it: prometheus/otel_scheme.py). Only the last
# sample's series are held (a gone process's tuple goes with the next sample). Looked up by
# the reading's own attribute tuple as an object (backends and attribution hand the same one
# every read, and a tuple's hash is not cached: hashing a process's attributes each cycle
# cost as much as building them); the slot's list of own tuples holds those objects, so an
# id in the cache is not reused while it is kept (an own tuple alive with that id is the one
# it was made for), and an entry is the whole attributes alone, not an (own, attributes)
# pair (0.47 MiB of pairs at 8 x 2,048).
# Keyed by the own tuple's id alone where the metric does not choose the device attributes
# (not ``hw.*``: ``_series_attributes``), else by (metric, id): no key tuple per series (at
# 8 x 2,048, 0.45 MiB of them for the process series).
_Known = dict[tuple[str, int] | int, Attributes]
_attributes: dict[tuple[str, str],
                  tuple[DeviceIdentity, Attributes, _Known, list[Attributes]]] = {}


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
    owns: list[Attributes] = []  # keeps the ids in ``used`` those of these objects
    starts = device.counter_starts
    out = []
    for reading in readings:
        metric, own = reading.metric, reading.attributes
        if not carried(metric, reading.value, own):
            continue  # a value that cannot be read (or carried) is absent, never NaN
        key = (metric, id(own)) if metric.startswith("hw.") else id(own)
        # A hit is ``own``'s: the held list (``held[3]``) keeps alive the object the entry
        # was made for, so no other object has its id.
        attributes = known.get(key)
        if attributes is None:
            attributes = _series_attributes(device, metric, own, extra)
        used[key] = attributes
        owns.append(own)
        start = (starts.get((metric, own), device.start_time_ns) if starts
                 else device.start_time_ns)
        # The device's own time of the value where it gave one (never before the series'
        # start: a value cached since before the agent started is dated at the start).
        at = max(reading.time_ns, start) if reading.time_ns else time_ns
        out.append((metric, SeriesPoint(attributes, start, at, reading.value)))
    if len(_attributes) >= MAX_KEPT and slot not in _attributes:
        _attributes.clear()
    _attributes[slot] = (device.identity, extra, used, owns)
    return out


def _runs(points: Iterable[tuple[str, SeriesPoint]]) -> dict[str, Points]:
    """Points of one sample, by metric, in the order they came."""
    runs: dict[str, Points] = {}
    for metric, point in points:
        run = runs.get(metric)
        if run is None:
            runs[metric] = [point]
        else:
            run.append(point)
    return runs


def _sample_runs(device: DeviceSnapshot, group: str, sample: object,
                 readings: Sequence[Reading], time_ns: int, *,
                 extra: Attributes) -> _Kept:
    """The (device, group)'s entry for ``sample``: its runs, and their ``key``."""
    slot = (device.identity.uuid, group)
    kept = _latest.get(slot)
    same_device = (kept is not None and kept.identity is device.identity
                   and kept.counter_starts is device.counter_starts
                   and kept.start_time_ns == device.start_time_ns and kept.extra == extra)
    if same_device and kept is not None and kept.sample is sample:
        return kept
    made: SampleRuns | None = None
    shape = kept.shape if same_device and kept is not None else None
    if shape is not None and kept is not None:
        checked = len(kept.readings) == len(readings) \
            and all(map(operator.is_, kept.readings, readings))
        if checked and kept.key is shape and all(shape.untimed):
            made = _redated(kept.slot, time_ns)
        else:
            made = _shaped_runs(shape, readings, time_ns, checked=checked)
    key: object = shape
    if made is None:
        points = _runs(_device_points(device, readings, time_ns, extra, group))
        shape = _shape_of(readings, points)
        # A sample of a new shape is handed out shaped too (its points were built to learn
        # the shape): a group whose sample stays for many exports (slow, gpm) is then of a
        # shape from the start, and so is every run of most metrics.
        made = _shaped_runs(shape, readings, time_ns) if shape is not None else None
        key = shape
        if made is None:
            general: dict[str, Run] = dict(points)
            made = SampleRuns(general)
            key = general
        else:
            for metric, run in made.runs.items():  # built now, with the points just made
                if isinstance(run, ShapedRun):
                    run.seed(points[metric])
    if len(_latest) >= MAX_KEPT and slot not in _latest:
        _latest.clear()
    kept = _latest[slot] = _Kept(sample, readings, device.identity, device.counter_starts,
                                 device.start_time_ns, extra, made, shape, key)
    return kept


class _KeptOwn(NamedTuple):
    sample: AgentSample
    runs: dict[str, Run]
    shape: _SampleShape | None
    keys: ReadingKeys | None  # the sample's, where it came as keys and values
    slot: SampleRuns  # ``runs``, as ``series_slots`` hands them out (the same object)


# Self-telemetry and node-level samples, by their place in the snapshot (the agent's first):
# the last one's runs and shape. Self-telemetry is a new sample at every export, of the last
# one's shape nearly always (the same counters, new values): its runs are ``ShapedRun``s, so
# the encoder writes its metrics from templates as it does the devices'. A node plugin's
# sample is the same object until the plugin replaces it: the same runs, as for a device.
_own_latest: dict[int, _KeptOwn] = {}


def _own_points(sample: AgentSample) -> dict[str, Points]:
    """The general path: every reading carried, dated by its sample."""
    return _runs((reading.metric, SeriesPoint(reading.attributes, sample.start_time_ns,
                                              sample.time_ns, reading.value))
                 for reading in sample.readings
                 if carried(reading.metric, reading.value, reading.attributes))


def _own_runs(slot: int, sample: AgentSample) -> dict[str, Run]:
    """A self-telemetry or node sample's runs: of the last sample's shape (the same metrics,
    own attributes, value types and start, every value carried) in a few C calls, as
    ``_shaped_runs`` makes a device's; else built point by point, and the shape learnt."""
    kept = _own_latest.get(slot)
    if kept is not None and kept.sample is sample:
        return kept.runs
    shape = kept.shape if kept is not None \
        and kept.sample.start_time_ns == sample.start_time_ns else None
    runs: dict[str, Run] | None = None
    if shape is not None and kept is not None:
        # A sample of the keys the shape was learnt from (the same object: self-telemetry
        # hands them on while its series stay) has its metrics and attributes: its values
        # are taken as they are, and no reading is built or compared.
        keys = sample.keys
        if keys is not None and keys is kept.keys:
            values = list(sample.values or ())
            fits = _carries(shape, values)
        else:
            values = list(map(_VALUE, sample.readings))
            fits = _fits(shape, sample.readings, values)
        if fits:
            # Every point is dated by the sample (the readings' own times are not read).
            times = [sample.time_ns] * len(values)
            runs = {metric: ShapedRun(run, pick(values), pick(times))
                    for metric, run, pick in shape.runs}
    if runs is None:
        points = _own_points(sample)
        shape = _shape_of(sample.readings, points)
        runs = dict(points)
        if shape is not None:
            # Handed out shaped from the first (as a device's new shape is): the metrics'
            # templates are made now, and the next sample of the shape only fills them.
            for metric, run_shape, _ in shape.runs:
                points_of = points[metric]
                shaped = ShapedRun(run_shape, list(map(_VALUE, points_of)),
                                   list(map(_TIME, points_of)))
                shaped.seed(points_of)
                runs[metric] = shaped
    if len(_own_latest) >= MAX_KEPT and slot not in _own_latest:
        _own_latest.clear()
    _own_latest[slot] = _KeptOwn(sample, runs, shape, sample.keys, SampleRuns(runs))
    return runs


def _own_slot(slot: int, sample: AgentSample) -> SampleRuns:
    """``_own_runs`` as ``series_slots`` hands them out: the same object while they are."""
    runs = _own_runs(slot, sample)
    kept = _own_latest.get(slot)  # gone only if another thread cleared the table just now
    return kept.slot if kept is not None and kept.runs is runs else SampleRuns(runs)


@dataclass(frozen=True, slots=True, eq=False)
class SeriesLayout:
    """Which runs make each metric, for a sequence of run structures (``_Kept.key`` per
    device sample, the ``RunShape``s or runs dict of a self-telemetry or node sample): the
    same object while every metric's runs are of the same shapes, or the same lists, in the
    same order (compared by identity). An encoder that wrote the last export of this layout
    knows every metric's place and size in its request is unchanged, that no series ended,
    and that only the metrics of samples with new runs need writing
    (``ProtoEncoder.encode_request``)."""

    keys: list[object]
    # Each metric, names sorted, and the picker of its runs from all samples' runs in order.
    pickers: tuple[tuple[str, Callable[[Sequence[Any]], Any]], ...]
    # Per sample (the ``SampleRuns`` ``series_slots`` hands out, in order): the indices in
    # ``pickers`` of the metrics it has runs of.
    metrics_of: tuple[tuple[int, ...], ...]

    def grouped(self, slots: list[SampleRuns]) -> dict[str, list[Run]]:
        """``series_runs``' answer from the samples' runs: one C call per metric."""
        every = list(chain.from_iterable(map(dict.values, map(_RUNS, slots))))
        return {metric: list(pick(every)) for metric, pick in self.pickers}


def _new_layout(keys: list[object], slots: list[SampleRuns]) -> SeriesLayout:
    indices: dict[str, list[int]] = {}
    at = 0
    samples = [slot.runs for slot in slots]
    for runs in samples:
        for metric in runs:
            indices.setdefault(metric, []).append(at)
            at += 1
    names = sorted(indices)
    index = {metric: i for i, metric in enumerate(names)}
    return SeriesLayout(keys, tuple((metric, _picker(indices[metric])) for metric in names),
                        tuple(tuple(index[metric] for metric in runs) for runs in samples))


class _Device(NamedTuple):
    """A device's samples at the last ``series_slots`` call, with their entries and what
    ``_sample_runs`` checks of the device (identity, counter starts, start time, workload
    attributes). A group sample that is the same object at the same place, of a device
    that is the same, takes its entry with no look-up or call (the slow, gpm and processes
    groups between their samples: three of a GPU's five samples at most exports); a health
    that is the same object has the same readings, and only their time is new. Only the
    last call's are held; the entries are ``_latest``'s (never changed once made)."""

    identity: DeviceIdentity
    counter_starts: Mapping[tuple[str, Attributes], int]
    start_time_ns: int
    extra: Attributes
    groups: tuple[object, ...]
    entries: list[_Kept]
    health: object  # the DeviceHealth
    health_slot: SampleRuns
    health_key: object
    redated: bool  # its runs are a shape's, none with a time of its own: ``_redated`` holds


_devices: dict[str, _Device] = {}
_SLOT = attrgetter("slot")
_KEY = attrgetter("key")
_END = object()
# The last layout made (one slot), shared as ``_latest`` is (a lost race makes a new one:
# the next export then takes the encoder's general path once).
_layout: list[SeriesLayout | None] = [None]


def series_slots(snapshot: NodeSnapshot) -> tuple[list[SampleRuns], SeriesLayout]:
    """Every sample's runs by metric (``SampleRuns``), in order (each device's groups and
    health, then the self-telemetry and node samples), and their layout: the same
    ``SeriesLayout`` object as the last call's when every sample's runs have the same
    structure as then (the steady state: new fast-group, health and self-telemetry samples
    of the last ones' shapes, the others the same samples, whose ``SampleRuns`` are the same
    objects)."""
    slots: list[SampleRuns] = []
    keys: list[object] = []
    for device in snapshot.devices:
        identity = device.identity
        uuid = identity.uuid
        # Attributes a workload source gives the device (a DRA claim's driver/pool/device).
        extra = snapshot.device_attributes.get(uuid, ())
        health = snapshot.health_of(uuid)
        last = _devices.get(uuid)
        if last is None or last.identity is not identity \
                or last.counter_starts is not device.counter_starts \
                or last.start_time_ns != device.start_time_ns or last.extra != extra:
            last = None
        groups = tuple(device.samples.values())
        entries: list[_Kept] = []
        for at, group in enumerate(groups):
            if last is not None and at < len(last.groups) and last.groups[at] is group:
                kept = last.entries[at]  # the same sample of the same device: its entry
            else:
                kept = _sample_runs(device, group.group, group, group.readings, group.time_ns,
                                    extra=extra)
            entries.append(kept)
        slots += map(_SLOT, entries)
        keys += map(_KEY, entries)
        # The health readings are the export's own (dated by the snapshot), but of the
        # same shape export after export: while the health is the same object, the last
        # entry's values dated anew (``_redated``, as ``_sample_runs`` would find them).
        if last is not None and health is last.health and last.redated:
            health_slot, health_key = _redated(last.health_slot, snapshot.taken_ns), last.health_key
        else:
            now = (*health.status, *health.readings)
            kept = _sample_runs(device, "", now, now, snapshot.taken_ns, extra=extra)
            health_slot, health_key = kept.slot, kept.key
            last = None
        slots.append(health_slot)
        keys.append(health_key)
        if len(_devices) >= MAX_KEPT and uuid not in _devices:
            _devices.clear()
        _devices[uuid] = _Device(
            identity, device.counter_starts, device.start_time_ns, extra, groups, entries,
            health, health_slot, health_key,
            last.redated if last is not None
            else health_key is kept.shape is not None and all(kept.shape.untimed))
    # Self-telemetry and node-level samples: their readings carry their own attributes.
    samples = (snapshot.agent, *snapshot.node) if snapshot.agent else snapshot.node
    for slot, sample in enumerate(samples):
        own = _own_slot(slot, sample)
        slots.append(own)
        runs = own.runs
        # Their ShapedRuns' RunShapes (each made for one metric of one sample shape, so
        # they stand for the names too), else the runs dict (kept only with its sample).
        shapes = run_shapes(list(runs.values()))
        if shapes is None:
            keys.append(runs)
        else:
            keys += shapes
            keys.append(_END)  # where the sample's shapes end (a sample may have none)
    layout = _layout[0]
    if layout is None or len(layout.keys) != len(keys) \
            or not all(map(operator.is_, layout.keys, keys)):
        layout = _layout[0] = _new_layout(keys, slots)
    return slots, layout


def series_runs(snapshot: NodeSnapshot) -> dict[str, list[Run]]:
    """Metric name -> its points in runs, names sorted, runs in device order.

    A run is the points of one metric from one sample: a list of points, or, for a sample of
    a known shape (nearly every one), a ``ShapedRun``. A run of a sample that has not changed
    since the last call is the same object as then (never modified once returned), so an
    encoder may keep what it made of it: at a 1 s export, the slow, gpm and processes groups'
    points are the same for 30, 10 and 5 exports in a row; and a ``ShapedRun`` of a new
    sample of the same shape has the same ``RunShape``."""
    slots, layout = series_slots(snapshot)
    return layout.grouped(slots)


def series(snapshot: NodeSnapshot) -> dict[str, list[SeriesPoint]]:
    """Metric name -> its points, names sorted, points in device order."""
    return {metric: [point for run in runs for point in run]
            for metric, runs in series_runs(snapshot).items()}
