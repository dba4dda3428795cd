"""The one place a GPU's health is decided, and published for every reader.

Two views of a device meet here. The sampler knows whether the device answers: it does, a call
hangs past its deadline (degraded), or the device is lost (failed). The health engine, when
health events are on, knows what the device's events and polled readings say: XIDs, ECC errors,
gray failures, recovery actions, each held as a condition of one subsystem, and its XID counts.
Each time either view of a device changes, the board decides the device's :class:`DeviceHealth`
(the worse state of the two; a device that does not answer holds a ``driver`` condition) and
puts it into the snapshot store. Every reader (``hw.status`` in the OTLP and Prometheus series,
the local endpoint's ``/v1/snapshot`` and ``/v1/health``, so ``gpu-agent top`` and ``check``)
reads that record and decides nothing.

A partition (MIG instance, AMD partition) has no engine view: its health is whether it answers,
which its parent's sampler reports with the parent's (they share a thread and a fate).

Data flow: sampler --reachability--> board <--engine view-- engine; board --DeviceHealth-->
store --> readers. All calls arrive on the event loop.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpu_otel_agent.gpu_health.subsystems import DRIVER, subsystem_health
from gpu_otel_agent.model.snapshot import (
    DeviceHealth,
    HealthState,
    HeldCondition,
    Reading,
    SnapshotStore,
    status_readings,
    worst,
)


@dataclass(frozen=True)
class Reachability:
    """Whether the device answers its sampler."""

    state: HealthState = HealthState.OK  # OK: answers; DEGRADED: a call hangs; FAILED: lost
    reason: str = ""


@dataclass(frozen=True)
class EngineView:
    """What the health engine holds against a GPU: the state its conditions imply, the
    conditions (each in its subsystem) and its series (gpu.xid.errors, gpu.health.status)."""

    state: HealthState
    conditions: tuple[HeldCondition, ...] = ()
    readings: tuple[Reading, ...] = ()


ANSWERS = Reachability()
NOT_ANSWERING = "not answering"


def decide(reach: Reachability, view: EngineView | None) -> DeviceHealth:
    """A device's health from both views: the worse state, every condition behind it."""
    held = list(view.conditions) if view is not None else []
    if reach.state is not HealthState.OK:
        held.append(HeldCondition(DRIVER, reach.state, reach.reason or NOT_ANSWERING))
    state = reach.state if view is None else worst(reach.state, view.state)
    return DeviceHealth(state, status_readings(state), reach.reason,
                        view.readings if view is not None else (), subsystem_health(held),
                        engine=view is not None)


class HealthBoard:
    """Holds both views of each device and publishes its health when either changes."""

    def __init__(self, store: SnapshotStore) -> None:
        self._store = store
        self._reach: dict[str, Reachability] = {}
        self._views: dict[str, EngineView] = {}

    def reachability(self, uuid: str, state: HealthState, reason: str) -> None:
        """From the sampler: the device (or a partition) answers, hangs or is lost."""
        self._reach[uuid] = Reachability(state, reason)
        self._publish(uuid)

    def engine_view(self, uuid: str, view: EngineView) -> None:
        """From the health engine: its view of a GPU changed."""
        self._views[uuid] = view
        self._publish(uuid)

    def forget(self, uuid: str) -> None:
        """A partition was destroyed: nothing is held for it (the store drops its health)."""
        self._reach.pop(uuid, None)
        self._views.pop(uuid, None)

    def _publish(self, uuid: str) -> None:
        self._store.put_health(uuid, decide(self._reach.get(uuid, ANSWERS),
                                            self._views.get(uuid)))
