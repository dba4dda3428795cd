"""The agent's own health as metrics (``gpu_agent.*``), read into every snapshot.

The counters live where the work happens (``SamplerStats``, ``ExportStats``, the Prometheus
server); this module only turns their current values into readings when an exporter takes a
snapshot, so self-telemetry costs nothing between exports. Other parts of the agent (the
health events' spool, for instance) add their counters through :meth:`SelfTelemetry.add`.
"""

from __future__ import annotations

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
        for sampler in self._samplers:
            readings.extend(sampler_readings(sampler))
        readings.extend(library_call_readings(self._timed))
        readings.extend(library_error_readings(self._counted))
        for source in self._sources:
            readings.extend(source())
        return AgentSample(tuple(readings), self._start_time_ns, now_ns)


def sampler_readings(sampler: DeviceSampler) -> tuple[Reading, ...]:
    identity = sampler.snapshot.identity
    device: Attributes = (("hw.id", identity.uuid), ("gpu.index", identity.index))
    stats = sampler.stats
    readings = [
        Reading("gpu_agent.cycles.completed", stats.cycles, device),
        Reading("gpu_agent.cycles.missed", stats.missed_cycles, device),
        Reading("gpu_agent.cycle.time", stats.read_seconds_total, device),
        Reading("gpu_agent.call.overruns", stats.deadline_overruns, device),
        Reading("gpu_agent.read.errors", stats.errors, device),
    ]
    # Copied first: the loop may add a group while an export thread reads this.
    for group, seconds in sorted(dict(stats.last_read_seconds).items()):
        readings.append(
            Reading("gpu_agent.cycle.latency", seconds, (*device, ("gpu_agent.group", group)))
        )
    return tuple(readings)


def library_call_readings(devices: Iterable[CallTimed]) -> tuple[Reading, ...]:
    """Per library function, summed over the node's GPUs: a few series, not one per GPU."""
    totals: dict[str, tuple[int, float]] = {}
    for device in devices:
        for name, (calls, seconds) in device.call_times().items():
            before = totals.get(name, (0, 0.0))
            totals[name] = (before[0] + calls, before[1] + seconds)
    readings = []
    for name, (calls, seconds) in sorted(totals.items()):
        call = (("gpu_agent.call", name),)
        readings.append(Reading("gpu_agent.library.calls", calls, call))
        readings.append(Reading("gpu_agent.library.call.time", seconds, call))
    return tuple(readings)


def library_error_readings(devices: Iterable[ErrorCounted]) -> tuple[Reading, ...]:
    """Library errors per function and code, summed over the node's GPUs (a function that
    never failed has no series)."""
    totals: dict[tuple[str, str], int] = {}
    for device in devices:
        for key, count in device.error_counts().items():
            totals[key] = totals.get(key, 0) + count
    return tuple(
        Reading("gpu_agent.library.errors", count,
                (("gpu_agent.call", call), ("error.type", code)))
        for (call, code), count in sorted(totals.items())
    )
