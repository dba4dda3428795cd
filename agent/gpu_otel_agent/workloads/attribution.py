"""Per-process and per-container readings of one GPU, and who is on each GPU right now.

The sampler hands each device's process list here on the event loop; this turns it into the
``gpu.process.*`` and ``gpu.container.*`` readings of telemetry.md. Per-process series are
capped per GPU (largest memory first); the processes left out are counted in
``gpu.process.series.overflow`` and still count towards their container's totals, so nothing is
silently folded into another series.

Attribution publishes the readings itself (``put_processes``: into the snapshot store), on each
list and again whenever what it knows changes (a process exited, a pod's name arrived), from
the device's last list: sampler -> attribution -> store, nothing calls back into the sampler.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from gpu_otel_agent.model.process import PROCESS_GROUP, ProcessUsage
from gpu_otel_agent.model.snapshot import (
    Attributes,
    AttributeValue,
    DeviceIdentity,
    GroupSample,
    Reading,
)
from gpu_otel_agent.model.workload import GpuProcess, Workload
from gpu_otel_agent.threads.costs import ATTRIBUTION, Stage
from gpu_otel_agent.workloads.devices import GpuDevice
from gpu_otel_agent.workloads.procfs import ProcessFacts
from gpu_otel_agent.workloads.resolver import WorkloadResolver

PROCESS_MEMORY = "gpu.process.memory.usage"
PROCESS_UTILIZATION = "gpu.process.utilization"
PROCESS_CU_OCCUPANCY = "gpu.process.compute_unit.occupancy"
CONTAINER_MEMORY = "gpu.container.memory.usage"
CONTAINER_UTILIZATION = "gpu.container.utilization"
CONTAINER_LIMIT = "gpu.container.memory.limit"
OVERFLOW = "gpu.process.series.overflow"


@dataclass(frozen=True)
class AttributionSettings:
    max_process_series: int = 256  # per GPU
    command_line: bool = False


@dataclass(frozen=True, slots=True)
class _Identity:
    """What a process's series carry; computed once per process and GPU, until it changes."""

    facts: ProcessFacts
    process_attributes: Attributes
    workload: Workload
    workload_attributes: Attributes
    limit: int | None
    # The process as health events name it (``processes_on``): the same object every cycle.
    gpu_process: GpuProcess
    # Its last reading of each series (by metric, or by task for utilization), handed on
    # again while the value is the same (same type too: 1 and 1.0 encode differently). A
    # utilization reading's attributes are made with its first reading and then taken from
    # the last one, the same tuple every cycle: the exporters key what they keep of a series
    # on it (export/metrics/series.py). (Not a second dict by task: 0.47 MiB at 8 x 2,048.)
    # A reading is a frozen dataclass (four guarded attribute stores to build); most of a
    # process's figures (its memory, an idle encoder) hold still from cycle to cycle.
    kept: dict[str, Reading] = field(default_factory=dict, compare=False)


# A listed process and what its series carry (a plain tuple: built per process per cycle).
_Attributed = tuple[ProcessUsage, _Identity]


def _nowhere(uuid: str, value: object) -> None:
    return None


class Attribution:
    """A :class:`~gpu_otel_agent.model.workload.WorkloadLookup` from the latest process lists."""

    def __init__(self, resolver: WorkloadResolver, settings: AttributionSettings,
                 clock_ns: Callable[[], int] = time.time_ns, *,
                 put_processes: Callable[[str, GroupSample | None], None] | None = None,
                 publish_attributes: Callable[[str, Attributes], None] | None = None) -> None:
        """``put_processes(uuid, sample)`` publishes a device's process readings (``None``:
        none); ``publish_attributes(uuid, attributes)`` is told when what the device's own
        series carry beyond its identity changes (the DRA device a claim holds it as). Both
        default to nowhere."""
        self.resolver = resolver
        self.settings = settings
        self._clock_ns = clock_ns
        self._lists: dict[str, tuple[ProcessUsage, ...]] = {}
        # Devices whose processes are published: what a republish needs (their memory total).
        self._live: dict[str, tuple[DeviceIdentity, int | None]] = {}
        self._put = put_processes if put_processes is not None else _nowhere
        self._identities: dict[tuple[str, int], _Identity] = {}
        self._generation = resolver.workloads_generation  # of the identities held
        self._on_gpu: dict[str, tuple[GpuProcess, ...]] = {}
        self._partitions: dict[str, frozenset[str]] = {}  # parent UUID -> partition UUIDs
        self._device_attributes: dict[str, Attributes] = {}
        self._publish = publish_attributes if publish_attributes is not None else _nowhere
        resolver.subscribe(self._on_change)

    def publish(self, identity: DeviceIdentity, processes: tuple[ProcessUsage, ...],
                memory_total: int | None, time_ns: int) -> tuple[Reading, ...]:
        """A device's new list: its readings, published (and republished on every change
        until :meth:`withdraw`)."""
        readings = self.readings(identity, processes, memory_total)
        self._live[identity.uuid] = (identity, memory_total)
        self._put(identity.uuid, GroupSample(PROCESS_GROUP, readings, time_ns))
        return readings

    def withdraw(self, uuid: str) -> None:
        """The device is down or its processes group off: no series until its next list (its
        list stays, so events still name who was on it)."""
        if self._live.pop(uuid, None) is not None:
            self._put(uuid, None)

    def _on_change(self) -> None:
        # Pods or bindings changed: any process's workload may have. An exit alone changes
        # no other process's: their identities (and the readings they keep) stay, so an
        # exit costs a republish, not every process identified again (issue 41).
        if self._generation != self.resolver.workloads_generation:
            self._generation = self.resolver.workloads_generation
            self._identities.clear()
        if not self._live:
            return
        with Stage(ATTRIBUTION):
            now = self._clock_ns()
            for uuid, (identity, memory_total) in list(self._live.items()):
                readings = self.readings(identity, None, memory_total)
                self._put(uuid, GroupSample(PROCESS_GROUP, readings, now))

    def forget(self, uuid: str) -> None:
        """A partition was destroyed: its list and series go, its PIDs are no longer held."""
        self.withdraw(uuid)
        self._on_gpu.pop(uuid, None)
        self._device_attributes.pop(uuid, None)
        self._partitions = {parent: children - {uuid}
                            for parent, children in self._partitions.items()}
        if self._lists.pop(uuid, None):
            self._retain()

    def _retain(self) -> None:
        live = {(uuid, u.pid) for uuid, lst in self._lists.items() for u in lst}
        self._identities = {k: v for k, v in self._identities.items() if k in live}
        self.resolver.retain({pid for _, pid in live})

    def readings(self, identity: DeviceIdentity, processes: tuple[ProcessUsage, ...] | None,
                 memory_total: int | None = None) -> tuple[Reading, ...]:
        """The readings for ``identity``'s latest list (``None``: reuse the last list)."""
        if processes is not None:
            previous = self._lists.get(identity.uuid)
            self._lists[identity.uuid] = processes
            if previous is not None and {p.pid for p in previous} - {p.pid for p in processes}:
                self._retain()
        device = _gpu_device(identity, memory_total)
        claimed = self.resolver.device_attributes(device)
        if self._device_attributes.get(identity.uuid, ()) != claimed:
            self._device_attributes[identity.uuid] = claimed
            self._publish(identity.uuid, claimed)
        if identity.partition is not None:
            parent = identity.partition.parent_uuid
            children = self._partitions.get(parent, frozenset())
            if identity.uuid not in children:
                self._partitions = {**self._partitions, parent: children | {identity.uuid}}
        with self.resolver.batched():  # new PIDs: the event filter is rebuilt once
            attributed = self._attribute(self._lists.get(identity.uuid, ()), device)
        # Replaced whole (one reference store), so other threads read it without a lock.
        self._on_gpu[identity.uuid] = tuple(known.gpu_process for _, known in attributed)
        limit = self.settings.max_process_series
        ranked = sorted(attributed, key=_by_memory)
        out: list[Reading] = []
        for usage, known in ranked[:limit]:
            _process_readings(usage, known, out)
        out.append(Reading(OVERFLOW, max(len(ranked) - limit, 0)))
        out.extend(self._container_readings(attributed))
        return tuple(out)

    def _attribute(self, processes: tuple[ProcessUsage, ...],
                   device: GpuDevice) -> list[_Attributed]:
        found = []
        for usage in processes:
            facts = self.resolver.process(usage.pid)
            if facts is None:
                continue  # exited: its series goes now, not when the GPU stops listing it
            key = (device.uuid, usage.pid)
            identity = self._identities.get(key)
            if identity is None or identity.facts is not facts:
                identity = self._identify(usage.pid, facts, device)
                self._identities[key] = identity
            found.append((usage, identity))
        return found

    def _identify(self, pid: int, facts: ProcessFacts, device: GpuDevice) -> _Identity:
        workload = self.resolver.workload(facts, device)
        limit = self.resolver.memory_limit(facts, device) if facts.cgroup.known else None
        attrs: list[tuple[str, AttributeValue]] = [
            ("process.pid", facts.pid),
            ("process.executable.name", facts.executable),
        ]
        if self.settings.command_line and facts.command_line:
            attrs.append(("process.command_line", facts.command_line))
        workload_attributes = workload.attributes()
        attrs.extend(workload_attributes)
        return _Identity(facts, tuple(attrs), workload, workload_attributes, limit,
                         GpuProcess(pid, facts.executable, workload))

    @staticmethod
    def _container_readings(attributed: list[_Attributed]) -> list[Reading]:
        memory: dict[Attributes, int] = defaultdict(int)
        utilization: dict[Attributes, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        limits: dict[Attributes, int] = {}
        for usage, identity in attributed:
            workload = identity.workload_attributes
            if not workload:
                continue
            memory[workload] += usage.memory_bytes or 0
            for task, value in usage.utilization:
                utilization[workload][task] += value
            if identity.limit is not None:
                limits[workload] = identity.limit
        out = []
        for workload in sorted(memory):
            attrs = workload
            out.append(Reading(CONTAINER_MEMORY, memory[workload], attrs))
            for task, value in sorted(utilization[workload].items()):
                out.append(Reading(CONTAINER_UTILIZATION, min(value, 1.0),
                                   (*attrs, ("hw.gpu.task", task))))
            if workload in limits:
                out.append(Reading(CONTAINER_LIMIT, limits[workload], attrs))
        return out

    # -- WorkloadLookup -------------------------------------------------------------------

    def processes_on(self, uuid: str) -> tuple[GpuProcess, ...]:
        """The GPU's processes as its latest readings attributed them (exited ones are gone as
        soon as their series are). A GPU that was lost keeps its last list, so its events name
        the pods that were on it when it went. A partitioned GPU's processes include those on
        each of its partitions (a fault of the parent hits them all). Safe to call from any
        thread: it only reads immutable values the event loop replaces."""
        own = self._on_gpu.get(uuid, ())
        children = self._partitions.get(uuid)
        if not children:
            return own
        return own + tuple(p for child in sorted(children) for p in self._on_gpu.get(child, ()))


def _by_memory(item: _Attributed) -> tuple[int, int]:
    """Largest memory first, then by PID: who keeps a series when there are too many."""
    usage = item[0]
    return -(usage.memory_bytes or 0), usage.pid


def _same(held: float | int, value: float | int) -> bool:
    """Whether a reading of ``held`` says what one of ``value`` would, to the bit: equal, of
    one type (1 and 1.0 encode differently) and sign (0.0 and -0.0 too)."""
    return held == value and type(held) is type(value) and (
        bool(value) or math.copysign(1, held) == math.copysign(1, value))


# The ("hw.gpu.task", task) pair of utilization series, one object per task for every
# process: a pair per process and task cost 0.34 MiB at 8 x 2,048 (three tasks a process).
# The tasks are the few an engine has (sm, enc, dec, ...); bounded all the same.
_TASK_PAIRS: dict[str, tuple[str, str]] = {}
_MAX_TASKS = 64


def _process_readings(usage: ProcessUsage, identity: _Identity, out: list[Reading]) -> None:
    """One process's series, appended to ``out``: each the reading kept from the last cycle
    while its value is the same (most often the very object: a sample's figures are shared,
    figures_of in the NVIDIA plugin), else a new one kept for the next."""
    kept = identity.kept
    if usage.memory_bytes is not None:
        out.append(_kept_reading(identity, PROCESS_MEMORY, usage.memory_bytes))
    for task, value in usage.utilization:
        held = kept.get(task)
        if held is None:
            pair = _TASK_PAIRS.get(task)
            if pair is None:
                if len(_TASK_PAIRS) >= _MAX_TASKS:
                    _TASK_PAIRS.clear()
                pair = _TASK_PAIRS[task] = ("hw.gpu.task", task)
            held = kept[task] = Reading(PROCESS_UTILIZATION, value,
                                        (*identity.process_attributes, pair))
        elif held.value is not value and not _same(held.value, value):
            held = kept[task] = Reading(PROCESS_UTILIZATION, value, held.attributes)
        out.append(held)
    if usage.compute_unit_occupancy is not None:
        out.append(_kept_reading(identity, PROCESS_CU_OCCUPANCY, usage.compute_unit_occupancy))


def _kept_reading(identity: _Identity, metric: str, value: float | int) -> Reading:
    """The process's reading of ``metric`` kept from the last cycle while ``value`` is the
    same, else a new one (with the process's own attributes) kept for the next."""
    held = identity.kept.get(metric)
    if held is None or not _same(held.value, value):
        held = identity.kept[metric] = Reading(metric, value, identity.process_attributes)
    return held


def _gpu_device(identity: DeviceIdentity, memory_total: int | None) -> GpuDevice:
    """What pod-resources ids are matched against. A partition is allocated by its own ids,
    never by its parent's PCI address (which names the whole GPU)."""
    if identity.partition is None:
        return GpuDevice(identity.uuid, identity.pci_bus_id, memory_total)
    return GpuDevice(identity.uuid, "", memory_total, identity.partition.allocation_ids)

