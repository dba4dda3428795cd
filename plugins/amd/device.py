"""One AMD GPU: probes once which amdsmi calls work, then reads metric groups."""

from __future__ import annotations

import logging
from typing import Any

from gpu_otel_agent.backends.protocol import PROCESS_GROUP, DeviceLost
from gpu_otel_agent.model.process import ProcessUsage
from gpu_otel_agent.model.snapshot import Attributes, DeviceIdentity, Reading
from gpu_otel_agent.plugins.amd.processes import LIST_CALL, ProcessSampler
from gpu_otel_agent.plugins.amd.readings import GROUPS, CallReading, reading_key
from gpu_otel_agent.plugins.amd.smi import Unavailable, classify

log = logging.getLogger(__name__)


class AmdDevice:
    def __init__(self, smi: Any, handle: Any, identity: DeviceIdentity) -> None:
        self._smi = smi
        self._handle = handle
        self._identity = identity
        self._plans: dict[str, tuple[CallReading, ...]] = {}
        self._current_call: str | None = None
        self._processes = ProcessSampler(self._list_processes)

    @property
    def identity(self) -> DeviceIdentity:
        return self._identity

    @property
    def handle(self) -> Any:
        return self._handle

    @property
    def current_call(self) -> str | None:
        return self._current_call

    def _invoke(self, call: CallReading) -> tuple[Reading, ...]:
        readings: tuple[Reading, ...] = self._call(call.name, call.read, self._smi, self._handle)
        return readings

    def _call(self, name: str, fn: Any, *args: Any) -> Any:
        """Call amdsmi, remembering the call's name while it runs (it may hang)."""
        self._current_call = name
        try:
            return fn(*args)
        except self._smi.AmdSmiException as error:
            raise classify(error, name) from error
        finally:
            self._current_call = None

    def _list_processes(self) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = self._call(
            LIST_CALL, self._smi.amdsmi_get_gpu_process_list, self._handle)
        return result

    def read_processes(self) -> tuple[ProcessUsage, ...]:
        return self._processes.read()

    def probe(self) -> frozenset[str]:
        plans: dict[str, tuple[CallReading, ...]] = {}
        for group, calls in GROUPS.items():
            working = []
            served: set[tuple[str, Attributes]] = set()
            for call in calls:
                try:
                    keys = {reading_key(r) for r in self._invoke(call)}
                except Unavailable as reason:
                    log.debug("%s: %s", self._identity.uuid, reason)
                    continue
                except self._smi.AmdSmiException:
                    keys = set()  # transient: keep the call, the value is absent when it fails
                if call.fallback and keys and keys <= served:
                    continue  # the metrics table already serves all of it
                served |= keys
                working.append(call)
            if working:
                plans[group] = tuple(working)
        self._plans = plans
        groups = set(plans)
        try:
            self._processes.read()
            groups.add(PROCESS_GROUP)
        except Unavailable as reason:
            log.debug("%s: %s", self._identity.uuid, reason)
        except self._smi.AmdSmiException:
            groups.add(PROCESS_GROUP)  # transient: keep it
        return frozenset(groups)

    def read(self, group: str) -> tuple[Reading, ...]:
        readings: list[Reading] = []
        for call in self._plans.get(group, ()):
            try:
                readings.extend(self._invoke(call))
            except DeviceLost:
                raise
            except (Unavailable, self._smi.AmdSmiException) as error:
                log.debug("%s: %s failed this cycle: %s", self._identity.uuid, call.name, error)
        return tuple(readings)
