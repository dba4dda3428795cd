"""The agent's own health as metrics (``gpu_agent.*``), read into every snapshot.

The counters live where the work happens (``SamplerStats``, ``ExportStats``, the Prometheus
server); this module only reads their current values when an exporter takes a snapshot, so
self-telemetry costs nothing between exports. Other parts of the agent (the health events'
spool, for instance) add their counters through :meth:`SelfTelemetry.add`.

A sample carries the values with the keys (metrics and attributes) they are for, the same keys
object while the series stay the same; the readings are built only when someone looks at them
(``AgentSample.of_values``). The functions below build the readings as they always were: they
are what a sample must equal (tests/unit/runtime/test_self_telemetry_values.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from functools import partial, reduce
from itertools import chain, compress, repeat
from operator import add, attrgetter, is_not, itemgetter, ne
from typing import Any, Protocol, cast, runtime_checkable

from gpu_otel_agent.export.metrics.pusher import ExportStats
from gpu_otel_agent.model.snapshot import AgentSample, Attributes, Reading, ReadingKeys
from gpu_otel_agent.sampling.sampler import DeviceSampler
from gpu_otel_agent.threads.costs import SELF_TELEMETRY, Stage


class StatsSource(Protocol):
    def __call__(self) -> tuple[Reading, ...]: ...


@runtime_checkable
class ValuesSource(Protocol):
    """A source that hands its values without a ``Reading`` each (the export counters,
    reliability, the health pipeline: about 20 readings a sample were built to be taken apart
    again). ``read`` appends its values and returns what decides their series (its layout
    token, compared by equality); ``keys`` gives the series of a token, in the order of the
    values. A sample's readings, when looked at, are ``Reading(metric, value, attributes)``
    of those: what the source's readings function gives."""

    def read(self, values: list[float | int]) -> Hashable: ...

    def keys(self, token: Any) -> Iterable[tuple[str, Attributes]]: ...


@runtime_checkable
class CallTimed(Protocol):
    """A device that times its library calls (the NVIDIA one does)."""

    def call_times(self) -> Mapping[str, tuple[int, float]]: ...


@runtime_checkable
class ErrorCounted(Protocol):
    """A device that counts its library errors per (function, code name) (the NVIDIA one)."""

    def error_counts(self) -> Mapping[tuple[str, str], int]: ...


_METRIC = attrgetter("metric")
_OWN = attrgetter("attributes")
_VALUE = attrgetter("value")


class SelfTelemetry:
    def __init__(self, start_time_ns: int) -> None:
        self._start_time_ns = start_time_ns
        self._samplers: list[_SamplerPart] = []
        self._sources: list[StatsSource | Callable[[], tuple[Reading, ...]] | ValuesSource] = []
        self._valued: list[bool] = []  # each source's: a ``ValuesSource``
        self._calls = _CallsPart(())
        self._errors = _ErrorsPart(())
        # The last sample's layout (each part's token) and the keys it gave: the same keys
        # object while the layout holds (``AgentSample.keys``, compared by identity). One
        # tuple, read and replaced whole: two threads taking samples at once (an export and
        # a scrape) never pair one's layout with the other's keys.
        self._last: tuple[list[Hashable], ReadingKeys] = ([], ReadingKeys((), ()))
        # The last built readings of the counters (``_Kept``); one reader's look at a time
        # builds them (a lost race only builds anew).
        self._kept: dict[tuple[str, Attributes], Reading] = {}

    def watch_samplers(self, samplers: Sequence[DeviceSampler]) -> None:
        self._samplers = [_SamplerPart(sampler) for sampler in samplers]

    def watch_devices(self, devices: Iterable[object]) -> None:
        devices = list(devices)
        self._calls = _CallsPart([d for d in devices if isinstance(d, CallTimed)])
        self._errors = _ErrorsPart([d for d in devices if isinstance(d, ErrorCounted)])

    def add(self, source: StatsSource | Callable[[], tuple[Reading, ...]] | ValuesSource
            ) -> None:
        """A source of readings, or of values with their layout (``ValuesSource``); each
        sample has their series after the counters', in the order they were added."""
        self._sources.append(source)
        # Told apart once here: a runtime protocol check costs microseconds a call.
        self._valued.append(isinstance(source, ValuesSource))

    def sample(self, now_ns: int) -> AgentSample:
        with Stage(SELF_TELEMETRY):
            return self._sample(now_ns)

    def _sample(self, now_ns: int) -> AgentSample:
        """Values and the layout they are in, part by part, without a ``Reading`` per
        counter: the readings (what ``sampler_readings``, ``library_call_readings``,
        ``library_error_readings`` and the sources give, in that order) are built only when
        someone looks at them."""
        values: list[float | int] = []
        parts: list[_Part] = [*self._samplers, self._calls, self._errors]
        layout: list[Hashable] = [part.read(values) for part in parts]
        counted = len(values)  # the counters' values; the sources' follow
        # Per source: its own readings, or (a values source) where its values end.
        sourced: list[tuple[Reading, ...] | int] = []
        for source, valued in zip(self._sources, self._valued, strict=True):
            if valued:
                layout.append(cast(ValuesSource, source).read(values))
                sourced.append(len(values))
                continue
            readings = cast(Callable[[], tuple[Reading, ...]], source)()
            sourced.append(readings)
            values.extend(map(_VALUE, readings))
            layout.append((tuple(map(_METRIC, readings)), tuple(map(_OWN, readings))))
        last, keys = self._last
        if layout != last:
            pairs = [pair for part, token in zip(parts, layout, strict=False)
                     for pair in part.keys(token)]
            for source, token, own in zip(self._sources, layout[len(parts):], sourced,
                                          strict=True):
                if isinstance(own, int):
                    pairs.extend(cast(ValuesSource, source).keys(token))
                else:
                    pairs.extend(zip(map(_METRIC, own), map(_OWN, own), strict=True))
            keys = ReadingKeys(tuple(metric for metric, _ in pairs),
                               tuple(attributes for _, attributes in pairs))
            self._last = (layout, keys)
        return AgentSample.of_values(keys, values, self._start_time_ns, now_ns,
                                     partial(self._readings, keys, values, counted, sourced))

    def _readings(self, keys: ReadingKeys, values: list[float | int], counted: int,
                  sourced: list[tuple[Reading, ...] | int]) -> tuple[Reading, ...]:
        """The readings a sample stands for: the counters' and the values sources' (each the
        last built one while its value is the same: ``_Kept``), the other sources' own."""
        kept = _Kept(self._kept)
        reading = kept.reading
        metrics, attributes = keys.metrics, keys.attributes
        readings = list(map(reading, metrics[:counted], values[:counted],
                            attributes[:counted]))
        start = counted
        for own in sourced:
            if isinstance(own, int):
                readings.extend(map(reading, metrics[start:own], values[start:own],
                                    attributes[start:own]))
                start = own
            else:
                readings.extend(own)
                start += len(own)
        self._kept = kept.now
        return tuple(readings)


class _Part(Protocol):
    """A part of self-telemetry: ``read`` appends its values, in the order ``keys`` gives
    their series, and returns what decides those series (its layout token)."""

    def read(self, values: list[float | int]) -> Hashable: ...

    def keys(self, token: Any) -> Iterable[tuple[str, Attributes]]: ...


_SAMPLER_METRICS = ("gpu_agent.cycles.completed", "gpu_agent.cycles.missed",
                    "gpu_agent.cycle.time", "gpu_agent.call.overruns", "gpu_agent.read.errors")
_SAMPLER_STATS = attrgetter("cycles", "missed_cycles", "read_seconds_total",
                            "deadline_overruns", "errors")


class _SamplerPart:
    """``sampler_readings``' values; its layout: the device's id and index, and the groups.

    While the device's identity is the same object and it has read the same groups as at the
    last sample (nearly always), the groups' latencies are read in one C call, nothing is
    copied or sorted, and the layout is the last one's object (compared by identity)."""

    __slots__ = ("known", "sampler")

    def __init__(self, sampler: DeviceSampler) -> None:
        self.sampler = sampler
        # The last sample's identity, its groups' count, their getter and the layout.
        self.known: tuple[object, int, Callable[[Mapping[str, float]], tuple[float, ...]],
                          Hashable] = (None, -1, _getter(()), ())

    def read(self, values: list[float | int]) -> Hashable:
        sampler = self.sampler
        identity = sampler.snapshot.identity
        stats = sampler.stats
        latest = stats.last_read_seconds
        known, count, pick, token = self.known
        try:
            # The same groups: as many, each of them there. One C call reads them all at
            # once, so a group the loop adds meanwhile is not half seen (the old code copied
            # the dict first for that).
            if identity is not known or len(latest) != count:
                raise KeyError
            seconds = pick(latest)
        except KeyError:
            latest = dict(latest)  # copied first: the loop may add a group meanwhile
            groups = tuple(sorted(latest))
            pick = _getter(groups)
            seconds = pick(latest)
            token = (identity.uuid, identity.index, *groups)
            self.known = (identity, len(groups), pick, token)
        values.extend(_SAMPLER_STATS(stats))
        values.extend(seconds)
        return token

    def keys(self, token: Any) -> Iterable[tuple[str, Attributes]]:
        device: Attributes = (("hw.id", token[0]), ("gpu.index", token[1]))
        return [*((metric, device) for metric in _SAMPLER_METRICS),
                *(("gpu_agent.cycle.latency", (*device, ("gpu_agent.group", group)))
                  for group in token[2:])]


_EXPORT_KEYS = (("gpu_agent.exports.completed", ()), ("gpu_agent.exports.failed", ()),
                ("gpu_agent.exports.skipped", ()))


class ExportValues:
    """The export counters (``export_readings``) as a ``ValuesSource``: three values, the
    same series always."""

    __slots__ = ("_stats",)

    def __init__(self, stats: ExportStats) -> None:
        self._stats = stats

    def read(self, values: list[float | int]) -> Hashable:
        values.extend(_EXPORT_COUNTS(self._stats))
        return None

    def keys(self, token: Any) -> Iterable[tuple[str, Attributes]]:
        return _EXPORT_KEYS


_EXPORT_COUNTS = attrgetter("exports", "failures", "skipped")


def export_readings(stats: ExportStats) -> tuple[Reading, ...]:
    """The export counters as readings (what ``ExportValues`` stands for)."""
    return (
        Reading("gpu_agent.exports.completed", stats.exports),
        Reading("gpu_agent.exports.failed", stats.failures),
        Reading("gpu_agent.exports.skipped", stats.skipped),
    )


_ABSENT = (0, -0.0)  # what a device without a function adds: nothing (-0.0 + x is x)


def _getter(names: tuple[str, ...]) -> Callable[[Mapping[str, Any]], tuple[Any, ...]]:
    """The values of ``names`` in a mapping, as a tuple, in one C call (KeyError if one is
    missing)."""
    if len(names) > 1:
        return itemgetter(*names)
    if names:
        name = names[0]
        return lambda times: (times[name],)
    return lambda times: ()


_Row = tuple[tuple[int, float], ...]  # a device's (calls, seconds) per function


def _picker(positions: tuple[int, ...]) -> Callable[[_Row], tuple[Any, ...]]:
    """The items of a row at ``positions``, as a tuple, in one C call."""
    if len(positions) > 1:
        return itemgetter(*positions)
    if positions:
        position = positions[0]
        return lambda row: (row[position],)
    return lambda row: ()


class _CallsPart:
    """``library_call_readings``' values, summed to the same numbers in C calls (8 GPUs x
    60-odd functions were a Python loop of 500 a sample): per function, 0 and 0.0 plus each
    device's in device order.

    While every device has called the same functions as at the last sample (nearly always),
    each device's pairs are read in one C call (nothing sorted), and only the functions a
    device called since are summed again: a device replaces a function's pair when it calls
    it, so a pair that is the same object as last time has the same value, and so has a
    sum of the same objects. Its layout: the functions."""

    __slots__ = ("devices", "known")

    def __init__(self, devices: Sequence[CallTimed]) -> None:
        self.devices = devices
        # The last sample's functions, their getter, each device's pairs and the totals
        # (calls and seconds of each function in turn, as the readings come).
        self.known: tuple[tuple[str, ...], Callable[[Mapping[str, tuple[int, float]]], _Row],
                          list[_Row] | None, list[float | int]] = ((), _getter(()), None, [])

    def read(self, values: list[float | int]) -> Hashable:
        times = [device.call_times() for device in self.devices]
        names, pick, last, totals = self.known
        try:
            # The same functions: each device has all of them and no others.
            if any(map(ne, map(len, times), repeat(len(names)))):
                raise KeyError
            rows: list[_Row] = list(map(pick, times))
        except KeyError:
            names = tuple(sorted(set().union(*times)))
            pick, last = _getter(names), None
            rows = [tuple(map(device_times.get, names, repeat(_ABSENT)))
                    for device_times in times]
        called: set[int] = set()
        if last is not None:
            # A device's pairs are looked through one by one (a C call each) only when its
            # pairs outside the functions already found called differ from the last ones (one
            # C comparison): a node's GPUs read the same groups on the same grid, so they
            # call the same functions, and only the first device is looked through. Equal
            # there means the same object or an equal pair, which sums to the same number:
            # calls are integers, seconds floats summed from +0.0 (where a zero's sign
            # cannot show), and NaN is never equal.
            rest: Callable[[_Row], tuple[Any, ...]] | None = None
            for row, before in zip(rows, last, strict=True):
                if rest is not None and rest(row) == rest(before):
                    continue
                called.update(compress(range(len(names)), map(is_not, row, before)))
                rest = _picker(tuple(i for i in range(len(names)) if i not in called))
        if last is None or len(called) * 2 > len(names):  # all anew: fewer C calls
            # A device without a function adds 0 and -0.0 (the additive identities: every
            # sum stays what the devices that have it make it).
            totals = [0, 0.0] * len(names)
            for row in rows:
                totals = list(map(add, totals, chain.from_iterable(row)))
        elif called:
            totals = totals.copy()
            for i in called:
                calls, seconds = zip(*[row[i] for row in rows], strict=True)
                totals[2 * i] = reduce(add, calls, 0)
                totals[2 * i + 1] = reduce(add, seconds, 0.0)
        self.known = (names, pick, rows, totals)
        values.extend(totals)
        return names

    def keys(self, token: Any) -> Iterable[tuple[str, Attributes]]:
        return [(metric, (("gpu_agent.call", name),)) for name in token
                for metric in ("gpu_agent.library.calls", "gpu_agent.library.call.time")]


class _ErrorsPart:
    """``library_error_readings``' values; its layout: the (function, code) pairs.

    Errors are rare, but a GPU keeps the ones its probe met (capabilities it lacks) for
    good: while every device's counts equal the last sample's (compared in C), the totals
    are the last ones, not summed again in Python. Equal counts give the same totals: they
    are integers (``ErrorCounted``), summed per key in device order."""

    __slots__ = ("devices", "known")

    def __init__(self, devices: Sequence[ErrorCounted]) -> None:
        self.devices = devices
        # The last sample's counts of each device, the totals and the layout they gave.
        self.known: tuple[list[Mapping[tuple[str, str], int]] | None, list[int],
                          tuple[tuple[str, str], ...]] = (None, [], ())

    def read(self, values: list[float | int]) -> Hashable:
        counted = [device.error_counts() for device in self.devices]
        last, sums, pairs = self.known
        if counted != last:
            totals: dict[tuple[str, str], int] = {}
            for counts in counted:
                for key, count in counts.items():
                    totals[key] = totals.get(key, 0) + count
            pairs = tuple(sorted(totals))
            sums = list(map(totals.__getitem__, pairs))
            self.known = (counted, sums, pairs)
        values.extend(sums)
        return pairs

    def keys(self, token: Any) -> Iterable[tuple[str, Attributes]]:
        return [("gpu_agent.library.errors", (("gpu_agent.call", call), ("error.type", code)))
                for call, code in token]


class _Kept:
    """The last sample's readings, handed on while a series' value is the same: most of
    self-telemetry's counters (errors, misses, the groups not read since, the library
    functions not called since) do not move between exports, and a ``Reading`` (a frozen
    dataclass) costs several times a look-up to build. Only this sample's are kept for the
    next (a gone series' reading goes with it)."""

    __slots__ = ("last", "now")

    def __init__(self, last: dict[tuple[str, Attributes], Reading] | None = None) -> None:
        self.last = last or {}
        self.now: dict[tuple[str, Attributes], Reading] = {}

    def reading(self, metric: str, value: float | int, attributes: Attributes) -> Reading:
        key = (metric, attributes)
        held = self.last.get(key)
        if held is None or not _same(held.value, value):
            held = Reading(metric, value, attributes)
        self.now[key] = held
        return held


def _same(held: float | int, value: float | int) -> bool:
    """The same value, as it would be written: of the same type, equal, and of the same sign
    (0.0 and -0.0 are equal but written differently; NaN is never the same)."""
    return held is value or (type(held) is type(value) and held == value
                             and (value != 0 or math.copysign(1, held) == math.copysign(1, value)))


def sampler_readings(sampler: DeviceSampler, kept: _Kept | None = None) -> tuple[Reading, ...]:
    identity = sampler.snapshot.identity
    device: Attributes = (("hw.id", identity.uuid), ("gpu.index", identity.index))
    stats = sampler.stats
    reading = (kept or _Kept()).reading
    readings = [
        reading("gpu_agent.cycles.completed", stats.cycles, device),
        reading("gpu_agent.cycles.missed", stats.missed_cycles, device),
        reading("gpu_agent.cycle.time", stats.read_seconds_total, device),
        reading("gpu_agent.call.overruns", stats.deadline_overruns, device),
        reading("gpu_agent.read.errors", stats.errors, device),
    ]
    # Copied first: the loop may add a group while an export thread reads this.
    for group, seconds in sorted(dict(stats.last_read_seconds).items()):
        readings.append(
            reading("gpu_agent.cycle.latency", seconds, (*device, ("gpu_agent.group", group)))
        )
    return tuple(readings)


def library_call_readings(devices: Iterable[CallTimed],
                          kept: _Kept | None = None) -> tuple[Reading, ...]:
    """Per library function, summed over the node's GPUs: a few series, not one per GPU."""
    totals: dict[str, tuple[int, float]] = {}
    for device in devices:
        for name, (calls, seconds) in device.call_times().items():
            before = totals.get(name, (0, 0.0))
            totals[name] = (before[0] + calls, before[1] + seconds)
    reading = (kept or _Kept()).reading
    readings = []
    for name, (calls, seconds) in sorted(totals.items()):
        call = (("gpu_agent.call", name),)
        readings.append(reading("gpu_agent.library.calls", calls, call))
        readings.append(reading("gpu_agent.library.call.time", seconds, call))
    return tuple(readings)


def library_error_readings(devices: Iterable[ErrorCounted],
                           kept: _Kept | None = None) -> tuple[Reading, ...]:
    """Library errors per function and code, summed over the node's GPUs (a function that
    never failed has no series)."""
    totals: dict[tuple[str, str], int] = {}
    for device in devices:
        for key, count in device.error_counts().items():
            totals[key] = totals.get(key, 0) + count
    reading = (kept or _Kept()).reading
    return tuple(
        reading("gpu_agent.library.errors", count,
                (("gpu_agent.call", call), ("error.type", code)))
        for (call, code), count in sorted(totals.items())
    )
