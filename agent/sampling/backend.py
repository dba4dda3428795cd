"""The interface between the vendor-neutral core and a GPU backend plugin.

Every method here blocks (it calls into a C library); the core only ever calls them on the
device's own worker thread, never on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from agent.model.process import ProcessUsage
from agent.model.snapshot import DeviceIdentity, Reading


class BackendUnavailable(Exception):
    """The vendor library is absent or refused to start; the backend is skipped."""


class DeviceLost(Exception):
    """The device is gone (NVML_ERROR_GPU_IS_LOST and the like)."""


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


PROCESS_GROUP = "processes"


@runtime_checkable
class ProcessReader(Protocol):
    """A device that can list the processes using it (optional, besides :class:`Device`).

    A device that implements it returns :data:`PROCESS_GROUP` from ``probe`` when listing works;
    the sampler then calls :meth:`read_processes` on that group's interval, on the device's
    worker thread.
    """

    def read_processes(self) -> tuple[ProcessUsage, ...]:
        """Every process on the device now. Raises DeviceLost; an unreadable list raises."""


class Backend(Protocol):
    @property
    def name(self) -> str: ...

    def open(self) -> BackendInfo:
        """Load and initialise the vendor library. Raises BackendUnavailable."""

    def devices(self) -> list[Device]: ...

    def close(self) -> None: ...
