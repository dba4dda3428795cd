"""The agent's own health as metrics (``gpu_agent.*``), read into every snapshot.

The counters live where the work happens (``SamplerStats``, ``ExportStats``, the Prometheus
server); this module only turns their current values into readings when an exporter takes a
snapshot, so self-telemetry costs nothing between exports. Other parts of the agent (the
health events' spool, for instance) add their counters through :meth:`SelfTelemetry.add`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol, runtime_checkable

from gpu_otel_agent.model.snapshot import AgentSample, Attributes, Reading
from gpu_otel_agent.sampling.sampler import DeviceSampler
from gpu_otel_agent.threads.costs import SELF_TELEMETRY, Stage


class StatsSource(Protocol):
    def __call__(self) -> tuple[Reading, ...]: ...


@runtime_checkable
class CallTimed(Protocol):
    """A device that times its library calls (the NVIDIA one does)."""

    def call_times(self) -> Mapping[str, tuple[int, float]]: ...


@runtime_checkable
class ErrorCounted(Protocol):
    """A device that counts its library errors per (function, code name) (the NVIDIA one)."""

    def error_counts(self) -> Mapping[tuple[str, str], int]: ...


class SelfTelemetry:
    def __init__(self, start_time_ns: int) -> None:
        self._start_time_ns = start_time_ns
        self._samplers: Sequence[DeviceSampler] = ()
        self._sources: list[StatsSource] = []
        self._timed: list[CallTimed] = []
        self._counted: list[ErrorCounted] = []
        # The last sample's readings of the counters below (``_Kept``); one exporter's
        # snapshot at a time takes a sample (the store's), a lost race only builds anew.
        self._kept: dict[tuple[str, Attributes], Reading] = {}

    def watch_samplers(self, samplers: Sequence[DeviceSampler]) -> None:
        self._samplers = samplers

    def watch_devices(self, devices: Iterable[object]) -> None:
        devices = list(devices)
        self._timed = [d for d in devices if isinstance(d, CallTimed)]
        self._counted = [d for d in devices if isinstance(d, ErrorCounted)]

    def add(self, source: StatsSource | Callable[[], tuple[Reading, ...]]) -> None:
        self._sources.append(source)

    def sample(self, now_ns: int) -> AgentSample:
        with Stage(SELF_TELEMETRY):
            return self._sample(now_ns)

    def _sample(self, now_ns: int) -> AgentSample:
        readings: list[Reading] = []
        kept = _Kept(self._kept)
        for sampler in self._samplers:
            readings.extend(sampler_readings(sampler, kept))
        readings.extend(library_call_readings(self._timed, kept))
        readings.extend(library_error_readings(self._counted, kept))
        self._kept = kept.now
        for source in self._sources:
            readings.extend(source())
        return AgentSample(tuple(readings), self._start_time_ns, now_ns)


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
