"""Immutable samples and the snapshot the exporters read.

Samplers publish a new :class:`DeviceSnapshot` after every group read; attribution publishes each
device's processes; the health board (``gpu_health/verdict.py``) publishes each device's final
:class:`DeviceHealth`. Exporters take :meth:`SnapshotStore.current` and never touch a GPU
library, so a hung NVML call can never stall an export (the failure mode of OTel observable
callbacks). Each part of a snapshot has one writer; readers only read.
"""

from __future__ import annotations

import enum
import functools
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import FrozenInstanceError, dataclass, field, replace
from types import MappingProxyType

AttributeValue = str | int | float | bool
Attributes = tuple[tuple[str, AttributeValue], ...]


@dataclass(frozen=True, slots=True)
class Reading:
    """One value of one metric, with the attributes beyond the device's own."""

    metric: str
    value: float | int
    attributes: Attributes = ()
    # When the device took the value (an NVML field's own timestamp), where it says; 0: the
    # moment the group was read. The point's time, so a cached value is not dated as new.
    time_ns: int = 0


@dataclass(frozen=True)
class DevicePartition:
    """Where a partition device sits in its parent: a MIG instance, an AMD compute partition.

    A device is a tree: what is physical (power, temperature, links, XID) stays on the parent,
    what is allocatable (memory, activity, processes, pods) moves to the partition. The core only
    needs the parent's UUID; the vendor names its scheme (``kind``), the partition's profile, the
    attributes its series carry (``gpu.mig.profile``, ``gpu.mig.gpu_instance.id``, ...) and the
    other ids a device plugin may allocate it by (NVIDIA's ``MIG-GPU-<uuid>/<gi>/<ci>``).
    """

    parent_uuid: str
    kind: str  # the partitioning scheme: "mig", ...
    profile: str  # the vendor's profile name: "3g.40gb", "CPX"
    attributes: Attributes = ()
    allocation_ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.parent_uuid:
            raise ValueError("a partition needs its parent's UUID")
        keys = [key for key, _ in self.attributes]
        if {"hw.id", "hw.parent"} & set(keys) or len(keys) != len(set(keys)):
            raise ValueError(f"partition attributes must be new, distinct keys: {keys}")


# hw.vendor as the vendor writes its name (the conventions' examples: 'AMD', 'Intel', 'Dell');
# the backends' own vendor keys ("nvidia", "amd") stay what the code compares.
VENDOR_NAMES = {"nvidia": "NVIDIA", "amd": "AMD"}


def device_name(vendor: str, index: object) -> str:
    """A GPU as a person names it: vendor and index (``NVIDIA 0``; a mixed node has a GPU 0 of
    each vendor)."""
    return f"{VENDOR_NAMES.get(vendor, vendor)} {index}"


@dataclass(frozen=True)
class DeviceIdentity:
    uuid: str
    index: int  # a partition has its parent's index
    vendor: str
    model: str
    pci_bus_id: str
    partition: DevicePartition | None = None  # set on a partition of a physical device
    # The conventions' device identity (recommended on hw.gpu.* points), each where known:
    # per device, so a mixed node says which GPU runs which driver.
    driver_version: str = ""
    serial_number: str = ""
    firmware_version: str = ""

    @property
    def parent_uuid(self) -> str | None:
        return self.partition.parent_uuid if self.partition is not None else None

    @property
    def order(self) -> tuple[int, bool, str]:
        """Sort key: by index, each parent before its partitions."""
        return (self.index, self.partition is not None, self.uuid)

    def attributes(self) -> Attributes:
        """The device's own attributes, one tuple for the identity's life: every series of
        the device holds it (the encoder's and the series' caches keep about 1,500 at 8 GPUs x
        64 processes), so one set of pairs instead of one per call (issue 41: 0.6 MiB)."""
        return self._attributes

    @functools.cached_property
    def _attributes(self) -> Attributes:  # not a field: equality and hash stay the fields'
        own: Attributes = (
            ("hw.id", self.uuid),
            ("hw.vendor", VENDOR_NAMES.get(self.vendor, self.vendor)),
            ("hw.model", self.model),
            ("gpu.index", self.index),
            ("gpu.pci.bus_id", self.pci_bus_id),
            *((key, value) for key, value in (("hw.driver_version", self.driver_version),
                                              ("hw.serial_number", self.serial_number),
                                              ("hw.firmware_version", self.firmware_version))
              if value),
        )
        if self.partition is None:
            return own
        return (*own, ("hw.parent", self.partition.parent_uuid), *self.partition.attributes)

    def fan_attributes(self) -> Attributes:
        """A fan of the GPU as the conventions' hardware component: its own ``hw.id`` (the GPU
        reports one fan reading, fan 0) and the GPU as ``hw.parent`` (hw.fan.speed_ratio lists
        no hw.type); the GPU's index and bus id so a panel can place it."""
        return (("hw.id", f"{self.uuid}/fan0"), ("hw.parent", self.uuid),
                ("gpu.index", self.index), ("gpu.pci.bus_id", self.pci_bus_id))

    def series_attributes(self) -> Attributes:
        """The attributes of the device's own series and health events (``hw.type`` added)."""
        attributes = self.attributes()
        return (*attributes[:1], ("hw.type", "gpu"), *attributes[1:])


class HealthState(enum.Enum):
    OK = "ok"
    DEGRADED = "degraded"
    FAILED = "failed"


_RANK = {HealthState.OK: 0, HealthState.DEGRADED: 1, HealthState.FAILED: 2}


def worst(*states: HealthState) -> HealthState:
    """The most severe of ``states`` (OK when there are none)."""
    return max(states, key=_RANK.__getitem__, default=HealthState.OK)


@dataclass(frozen=True, init=False)
class GroupSample:
    """The readings of one metric group taken at one moment."""

    group: str
    readings: tuple[Reading, ...]
    time_ns: int

    def __init__(self, group: str, readings: tuple[Reading, ...], time_ns: int) -> None:
        # The frozen dataclass's own __init__ sets each field with a call of
        # object.__setattr__; one update of the instance's __dict__ is half of that (one
        # made per read of every group, and per attributed process list).
        self.__dict__.update(group=group, readings=readings, time_ns=time_ns)


_new = object.__new__


@dataclass(frozen=True)
class DeviceSnapshot:
    identity: DeviceIdentity
    # The sampler's reachability of the device: OK (it answers), DEGRADED (a call hangs),
    # FAILED (lost). Its own bookkeeping and an input of the device's health, not the health
    # itself: readers of health read NodeSnapshot.health (decided in gpu_health/verdict.py).
    health: HealthState
    start_time_ns: int  # start of the cumulative counters we report for this device
    samples: Mapping[str, GroupSample] = field(default_factory=lambda: MappingProxyType({}))
    reason: str = ""  # why the device does not answer, for logs and events
    # Counter series that restarted (went backwards: driver reload, GPU reset, wrap): their
    # own start time, by (metric, attributes); the rest start at ``start_time_ns``.
    counter_starts: Mapping[tuple[str, Attributes], int] = field(
        default_factory=lambda: MappingProxyType({}))

    def with_sample(self, sample: GroupSample) -> DeviceSnapshot:
        # A read-only view's own copy (its dict's, one C call) is a quarter of what dict()
        # costs going key by key through the view; on every read and every join.
        held = self.samples
        samples = held.copy() if type(held) is MappingProxyType else dict(held)
        samples[sample.group] = sample
        # Neither dataclasses.replace nor the constructor: the frozen constructor sets each
        # field through object.__setattr__, a call each; the fields go into the new
        # snapshot's __dict__ in one (0.5 against 1.2 us, on every read of every group and
        # every join; no __post_init__ to run). Every field is passed on, in field order
        # (tests/unit/model/test_snapshot_with_sample.py fails when a field is added and not
        # here).
        snapshot = _new(DeviceSnapshot)
        snapshot.__dict__.update(identity=self.identity, health=self.health,
                                 start_time_ns=self.start_time_ns,
                                 samples=MappingProxyType(samples), reason=self.reason,
                                 counter_starts=self.counter_starts)
        return snapshot

    def without_group(self, group: str) -> DeviceSnapshot:
        samples = {name: s for name, s in self.samples.items() if name != group}
        return replace(self, samples=MappingProxyType(samples))

    def with_health(self, health: HealthState, reason: str = "") -> DeviceSnapshot:
        """A failed or unresponsive device's readings go absent rather than going stale."""
        samples = self.samples if health is HealthState.OK else MappingProxyType({})
        return replace(self, health=health, reason=reason, samples=samples)


@dataclass(frozen=True)
class HeldCondition:
    """One cause the health engine holds against a device, for clients that ask why."""

    subsystem: str  # gpu.health.subsystem
    state: HealthState
    reason: str


_STATUS = {state: tuple(Reading("hw.status", int(s is state), (("hw.state", s.value),))
                        for s in HealthState) for state in HealthState}


def status_readings(state: HealthState) -> tuple[Reading, ...]:
    """``hw.status``: 1 for ``state``, 0 for the other states (made once per state)."""
    return _STATUS[state]


@dataclass(frozen=True)
class SubsystemHealth:
    """One part of a GPU (``gpu.health.subsystem``): its state and the reasons behind it."""

    name: str
    state: HealthState
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeviceHealth:
    """A device's final health, decided once (``gpu_health/verdict.py``) and only read after:
    ``hw.status`` in every exporter, ``health`` in the local endpoint's documents (and so in
    ``gpu-agent top`` and ``check``), ``/v1/health``."""

    state: HealthState
    status: tuple[Reading, ...]  # hw.status for ``state``
    reason: str = ""  # why the device does not answer (lost, hung); empty while it answers
    # The health engine's series of the device: gpu.xid.errors, gpu.health.status.
    readings: tuple[Reading, ...] = ()
    subsystems: tuple[SubsystemHealth, ...] = ()  # every subsystem, in catalog order
    engine: bool = False  # the health engine judged it (health events on), not only reachability


# The health of a device no board has judged: a snapshot made without an agent (a test, the
# test record of ``gpu-agent check``). A running agent publishes one for every device first.
UNJUDGED = DeviceHealth(HealthState.OK, status_readings(HealthState.OK))


@dataclass(frozen=True, slots=True, eq=False)
class ReadingKeys:
    """The series of a sample's readings, in order: each one's metric and own attributes.
    The same object while a source's series stay the same, so a reader may compare it by
    identity (``export/metrics/series.py`` then skips comparing metric by metric)."""

    metrics: tuple[str, ...]
    attributes: tuple[Attributes, ...]


class AgentSample:
    """The agent's own counters at one moment (self-telemetry): readings tied to no device.

    Made of readings, or (``of_values``) of ``keys`` and ``values`` with the readings built
    at the first look: self-telemetry's 200-odd counters (at 8 GPUs) are read every export
    and almost never looked at one by one (the series path takes the values as they are
    while the keys are the last sample's), and a ``Reading`` costs several times a value to
    build. Immutable, and equal, hashed and shown as the frozen dataclass it was."""

    __slots__ = ("_build", "_readings", "keys", "start_time_ns", "time_ns", "values")

    _readings: tuple[Reading, ...] | None  # None: not built yet
    _build: Callable[[], tuple[Reading, ...]] | None
    keys: ReadingKeys | None  # with ``values``, the readings' metrics and attributes
    values: Sequence[float | int] | None  # the readings' values, in order
    start_time_ns: int  # agent start: the start of its cumulative counters
    time_ns: int

    def __init__(self, readings: tuple[Reading, ...], start_time_ns: int,
                 time_ns: int) -> None:
        _set = object.__setattr__
        _set(self, "_readings", readings)
        _set(self, "_build", None)
        _set(self, "keys", None)
        _set(self, "values", None)
        _set(self, "start_time_ns", start_time_ns)
        _set(self, "time_ns", time_ns)

    @classmethod
    def of_values(cls, keys: ReadingKeys, values: Sequence[float | int], start_time_ns: int,
                  time_ns: int, readings: Callable[[], tuple[Reading, ...]]) -> AgentSample:
        """A sample of ``values`` for ``keys``; ``readings`` builds the readings they stand
        for (``Reading(metric, value, attributes)`` each, or an equal one), when asked."""
        if len(values) != len(keys.metrics):
            raise ValueError(f"{len(values)} values for {len(keys.metrics)} series")
        sample = _new(cls)  # each field set once (not __init__'s, then these)
        _set = object.__setattr__
        _set(sample, "_readings", None)
        _set(sample, "_build", readings)
        _set(sample, "keys", keys)
        _set(sample, "values", values)
        _set(sample, "start_time_ns", start_time_ns)
        _set(sample, "time_ns", time_ns)
        return sample

    @property
    def readings(self) -> tuple[Reading, ...]:
        readings = self._readings
        if readings is None:  # two threads at once only build them twice
            build = self._build
            assert build is not None
            readings = build()
            object.__setattr__(self, "_readings", readings)
        return readings

    def _fields(self) -> tuple[tuple[Reading, ...], int, int]:
        return self.readings, self.start_time_ns, self.time_ns

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        assert isinstance(other, AgentSample)
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (f"AgentSample(readings={self.readings!r}, "
                f"start_time_ns={self.start_time_ns!r}, time_ns={self.time_ns!r})")

    def __reduce__(self) -> tuple[type[AgentSample], tuple[tuple[Reading, ...], int, int]]:
        """Copied and pickled as the readings it stands for (as the dataclass was)."""
        return AgentSample, self._fields()

    def __setattr__(self, name: str, value: object) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")


@dataclass(frozen=True)
class NodeSnapshot:
    devices: tuple[DeviceSnapshot, ...]
    taken_ns: int
    agent: AgentSample | None = None
    # Each device's final health by UUID (read it with ``health_of``).
    health: Mapping[str, DeviceHealth] = field(default_factory=lambda: MappingProxyType({}))
    # Readings of the node tied to no one device (per-process CUDA activity): each sample has
    # its own counter start (a process's, a container's), its readings their own attributes.
    node: tuple[AgentSample, ...] = ()
    # Attributes a device's own series carry beyond its identity, by UUID (the DRA device a
    # claim holds it as): they come from attribution, not from the device's sampler.
    device_attributes: Mapping[str, Attributes] = field(
        default_factory=lambda: MappingProxyType({}))

    def health_of(self, uuid: str) -> DeviceHealth:
        return self.health.get(uuid, UNJUDGED)


class SnapshotStore:
    """Holds the latest snapshot per device; writers replace, readers get an immutable view."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._devices: dict[str, DeviceSnapshot] = {}
        self._health: dict[str, DeviceHealth] = {}
        self._processes: dict[str, GroupSample] = {}
        # The last device joined with its processes, by UUID: rebuilt only when either changes
        # (a snapshot is taken every export; processes change every few seconds).
        self._joined: dict[str, tuple[DeviceSnapshot, GroupSample, DeviceSnapshot]] = {}
        self._agent_source: Callable[[int], AgentSample] | None = None
        self._node: dict[str, tuple[AgentSample, ...]] = {}
        self._attributes: dict[str, Attributes] = {}
        # The devices' UUIDs in ``DeviceIdentity.order``, sorted again only when a device comes,
        # goes or changes identity (a snapshot is taken every export, the set rarely changes).
        self._order: tuple[str, ...] | None = None
        # What a snapshot carries besides the devices (health, node samples, device
        # attributes), made again only after a change: health changes with a verdict, not
        # with every snapshot.
        self._views: _Views | None = None

    def put_device_attributes(self, uuid: str, attributes: Attributes) -> None:
        """Replace what ``uuid``'s series carry beyond its identity (empty: nothing)."""
        with self._lock:
            if attributes:
                self._attributes[uuid] = attributes
            else:
                self._attributes.pop(uuid, None)
            self._views = None

    def put_health(self, uuid: str, health: DeviceHealth) -> None:
        """The device's final health (the health board is the one writer)."""
        with self._lock:
            self._health[uuid] = health
            self._views = None

    def put_processes(self, uuid: str, sample: GroupSample | None) -> None:
        """The device's attributed processes (attribution is the one writer); ``None``
        withdraws them. Readers find them among the device's samples."""
        with self._lock:
            if sample is None:
                self._processes.pop(uuid, None)
                self._joined.pop(uuid, None)
            else:
                self._processes[uuid] = sample

    def set_agent_source(self, source: Callable[[int], AgentSample]) -> None:
        """Self-telemetry read into every snapshot, so every exporter carries it."""
        self._agent_source = source

    def put_node_samples(self, source: str, samples: tuple[AgentSample, ...]) -> None:
        """Replace ``source``'s node-level samples (an empty tuple withdraws them)."""
        with self._lock:
            self._node[source] = samples
            self._views = None

    def put(self, device: DeviceSnapshot) -> None:
        uuid = device.identity.uuid
        with self._lock:
            before = self._devices.get(uuid)
            if before is None or before.identity is not device.identity:
                self._order = None
            self._devices[uuid] = device

    def remove(self, uuid: str) -> None:
        """A partition was destroyed (reconfiguration): its series vanish with it."""
        with self._lock:
            self._devices.pop(uuid, None)
            self._order = None
            self._health.pop(uuid, None)
            self._processes.pop(uuid, None)
            self._joined.pop(uuid, None)
            self._attributes.pop(uuid, None)
            self._views = None

    def _sorted_devices(self) -> tuple[DeviceSnapshot, ...]:
        """Each device as its sampler left it, with its processes as attribution left them
        (under the lock)."""
        by_uuid = self._devices
        order = self._order
        if order is None:
            order = self._order = tuple(
                sorted(by_uuid, key=lambda uuid: by_uuid[uuid].identity.order))
        if not self._processes:
            return tuple(map(by_uuid.__getitem__, order))
        join = self._join
        return tuple([join(by_uuid[uuid]) for uuid in order])

    def _join(self, device: DeviceSnapshot) -> DeviceSnapshot:
        uuid = device.identity.uuid
        sample = self._processes.get(uuid)
        if sample is None:
            return device
        kept = self._joined.get(uuid)
        if kept is not None and kept[0] is device and kept[1] is sample:
            return kept[2]
        joined = device.with_sample(sample)  # the constructor: half what replace() costs
        self._joined[uuid] = (device, sample, joined)
        return joined

    def devices(self) -> tuple[DeviceSnapshot, ...]:
        """The devices alone: no health, no self-telemetry (a liveness check needs no more)."""
        with self._lock:
            return self._sorted_devices()

    def covers(self, device_count: int) -> bool:
        """Every one of ``device_count`` (physical) devices has been sampled or found unhealthy."""
        with self._lock:
            physical = [d for d in self._devices.values() if d.identity.partition is None]
            return len(physical) >= device_count and all(
                d.samples or d.identity.uuid in self._processes
                or d.health is not HealthState.OK for d in physical
            )

    def current(self, now_ns: int) -> NodeSnapshot:
        with self._lock:
            devices = self._sorted_devices()
            views = self._views
            if views is None:
                views = self._views = _Views(
                    MappingProxyType(dict(self._health)),
                    tuple(s for _, samples in sorted(self._node.items()) for s in samples),
                    MappingProxyType(dict(self._attributes)))
        source = self._agent_source
        agent = source(now_ns) if source is not None else None
        return NodeSnapshot(devices=devices, taken_ns=now_ns, agent=agent, health=views.health,
                            node=views.node, device_attributes=views.attributes)


@dataclass(frozen=True)
class _Views:
    """A snapshot's health, node samples and device attributes: read-only copies, shared by
    the snapshots taken until one of them changes."""

    health: Mapping[str, DeviceHealth]
    node: tuple[AgentSample, ...]
    attributes: Mapping[str, Attributes]
