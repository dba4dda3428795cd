"""The interface between the vendor-neutral core and a GPU backend plugin.

Every method here blocks (it calls into a C library); the core only ever calls them on the
device's own worker thread, never on the event loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from gpu_otel_agent.model import process
from gpu_otel_agent.model.process import ProcessUsage
from gpu_otel_agent.model.snapshot import DeviceIdentity, Reading
from gpu_otel_agent.model.workload import WorkloadLookup


class BackendUnavailable(Exception):
    """The vendor library is absent or refused to start; the backend is skipped."""


class DeviceLost(Exception):
    """The device is gone (NVML_ERROR_GPU_IS_LOST and the like)."""


class DeviceNeedsReset(DeviceLost):
    """The device answers that it must be reset before use (NVML_ERROR_RESET_REQUIRED): it is
    down like a lost one (health failed, re-probed at a low rate), under its own reason."""


class ReadSkipped(Exception):
    """This read got an answer the vendor library documents as passing (NVML's transient and
    backed-off codes): the group's values are absent this cycle. The backend has counted and
    logged it by its error policy; the sampler counts it in ``gpu_agent.read.errors`` and
    logs nothing more (it logged an ERROR with a traceback per GPU, issue 30)."""


class PartitionGone(Exception):
    """A partition was destroyed (the parent was reconfigured): drop it, re-enumerate."""


@dataclass(frozen=True)
class BackendInfo:
    vendor: str
    driver_version: str


class Device(Protocol):
    @property
    def identity(self) -> DeviceIdentity: ...

    @property
    def current_call(self) -> str | None:
        """The library call in progress, so a hang can be reported by name."""

    def probe(self) -> frozenset[str]:
        """Find out once which calls work; returns the metric groups this device can serve."""

    def read(self, group: str) -> tuple[Reading, ...]:
        """Read one metric group; unreadable values are left out. Raises DeviceLost."""


PROCESS_GROUP = process.PROCESS_GROUP  # defined with the model: attribution publishes it too


@runtime_checkable
class ProcessReader(Protocol):
    """A device that can list the processes using it (optional, besides :class:`Device`).

    A device that implements it returns :data:`PROCESS_GROUP` from ``probe`` when listing works;
    the sampler then calls :meth:`read_processes` on that group's interval, on the device's
    worker thread.
    """

    def read_processes(self) -> tuple[ProcessUsage, ...]:
        """Every process on the device now. Raises DeviceLost; an unreadable list raises."""


@runtime_checkable
class Partitioned(Protocol):
    """A physical device that may be split into partitions (MIG instances, AMD partitions).

    Each partition is a :class:`Device` of its own whose identity carries a
    :class:`~gpu_otel_agent.model.snapshot.DevicePartition`. The core samples partitions on
    their parent's worker, in the same job as the parent and under the parent's deadline (one
    thread per physical device, however it is split), parent first: a partition may serve what
    its parent's read of the same group fetched for all of them (one process list, split).
    """

    def partitions(self) -> tuple[Device, ...]:
        """The partitions as they are now (none when unpartitioned), enumerated afresh.

        Blocks (vendor calls). A partition already returned before keeps its object when it
        still exists, so its probe and its per-cycle state survive. Raises DeviceLost.
        """


class Backend(Protocol):
    @property
    def name(self) -> str: ...

    def open(self) -> BackendInfo:
        """Load and initialise the vendor library. Raises BackendUnavailable."""

    def devices(self) -> list[Device]: ...

    def close(self) -> None: ...


# -- optional capabilities ------------------------------------------------------------------
# A backend implements these only if its vendor library can do it; the core checks with
# isinstance (runtime_checkable), so a backend without them still works.


@dataclass(frozen=True)
class LinkFault:
    """What a kernel-log line says of a link fault beyond its code: an NVLink XID (144-150) or
    an NVSwitch SXID. ``fatal`` as the line says it (None: the line does not say); ``link`` the
    link it names (None: none, or the line's ``Link -1``); for an XID the unit (``RLW_RXPIPE``),
    the subcode (bits 20-25 of the first register, as NVIDIA's XID 144-150 decode table reads
    it) and the error status (the second register)."""

    fatal: bool | None = None
    link: int | None = None
    unit: str = ""
    subcode: int | None = None
    status: int | None = None


@dataclass(frozen=True)
class DeviceEvent:
    """Something a GPU reported on its own (not polled): an XID, an ECC error, ...

    ``kind`` is one of the ``EVENT_*`` names below. ``code`` is the XID number, or the
    recovery action for ``recovery_action`` (NVML's nvmlDeviceGpuRecoveryAction_t, 0-7, or
    :data:`RECOVERY_ACTION_UNKNOWN` when the backend could not read it). ``source`` says which
    channel saw it (``nvml``, ``kmsg``), so one fault seen by two channels can be reported once.
    """

    uuid: str
    kind: str
    time_ns: int
    code: int = 0
    source: str = "nvml"
    detail: str = ""
    name: str = ""  # EVENT_VENDOR only: the event's own name, ``gpu.<vendor>.<what>``
    # The partition (its UUID: a MIG instance) the event is scoped to; empty: the whole device.
    partition: str = ""
    link_fault: LinkFault | None = None  # what the kernel log's line says beyond the code


EVENT_SXID = "sxid"  # an NVSwitch SXID: ``uuid`` is the switch's PCI bus id, ``name`` its device


EVENT_XID = "xid"
EVENT_ECC_CORRECTED = "ecc_corrected"
EVENT_ECC_UNCORRECTED = "ecc_uncorrected"
EVENT_UNAVAILABLE = "unavailable"
EVENT_RECOVERY_ACTION = "recovery_action"
RECOVERY_ACTION_UNKNOWN = -1
# Memory faults with no event of their own in the contract: they change the GPU's health.
EVENT_MEMORY_RETIREMENT = "memory_retirement"  # a page/row will be retired at the next reset
EVENT_MEMORY_RETIREMENT_FAILURE = "memory_retirement_failure"
EVENT_FATAL_POISON = "fatal_poison"  # poisoned memory consumed: the work on the GPU is lost
EVENT_OTHER = "other"  # clock / power-source / P-state changes: counted, not reported
EVENT_PARTITIONS_CHANGED = "partitions_changed"  # re-enumerate the partitions (MIG reconfigured)
# AMD (amdsmi event notifications); ``detail`` carries the driver's message.
EVENT_GPU_RESET_START = "gpu_reset_start"  # the GPU is being reset: lost until it ends
EVENT_GPU_RESET_END = "gpu_reset_end"
EVENT_THERMAL_THROTTLE = "thermal_throttle"  # a thermal slowdown began (one-shot notification)
EVENT_VENDOR = "vendor"  # no shared meaning: reported under ``name``


EventBatch = Callable[[Sequence[DeviceEvent]], None]


@dataclass(frozen=True)
class EventSourceOptions:
    kmsg: bool = True  # also read the kernel log (NVIDIA: NVRM Xid lines)


class EventSource(Protocol):
    """A thread (or more) that hands device events to ``emit`` as they happen.

    ``emit`` is called from the source's own thread and must not block; ``stop`` returns
    promptly (sources wait with short timeouts so shutdown never waits on them).
    """

    @property
    def name(self) -> str: ...

    def start(self, emit: EventBatch) -> None: ...

    def stop(self) -> None: ...


@runtime_checkable
class EventCapable(Protocol):
    def event_sources(
        self, devices: Sequence[Device], options: EventSourceOptions
    ) -> list[EventSource]: ...


@runtime_checkable
class WorkloadCapable(Protocol):
    """The backend can list the processes on a GPU (PIDs), cheaply, for health events."""

    def workload_lookup(self) -> WorkloadLookup: ...
