"""One AMD GPU: probes which amdsmi calls work, then reads metric groups.

A call that answers NOT_SUPPORTED at probe is not dropped for good: during a GPU reset every
sysfs-backed call answers that (see :mod:`.smi`), and a probe that happens to run then would
otherwise cost the metric until the agent restarts. Such a call is deferred and tried again
from the group's own reads, after :data:`RETRY_FIRST_S` and then with doubling back-off up to
:data:`RETRY_MAX_S`, so a device that really lacks it pays one call every few minutes.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from gpu_otel_agent.backends.protocol import PROCESS_GROUP, DeviceLost
from gpu_otel_agent.model.process import ProcessUsage
from gpu_otel_agent.model.snapshot import Attributes, DeviceIdentity, Reading
from gpu_otel_agent.plugins.amd import sentinels
from gpu_otel_agent.plugins.amd.processes import (
    LIST_CALL,
    ProcessSampler,
    occupancy_is_percent,
)
from gpu_otel_agent.plugins.amd.readings import CallReading, build_groups, reading_key
from gpu_otel_agent.plugins.amd.smi import NotSupportedNow, Unavailable, classify

log = logging.getLogger(__name__)

RETRY_FIRST_S = 5.0
RETRY_MAX_S = 300.0

# What a compute partition of a partitioned MI300X carries is what the part measures per
# partition (its XCCs' busy on v1.6+ tables, its VRAM share) and its processes; everything else
# (activity, VRAM use, socket power and energy, temperatures, clocks, ECC, PCIe, XGMI,
# throttling) is the physical GPU's, the same on every partition's handle (ROCm/ROCm issue 4750:
# eight CPX partitions, one wattage, the full VRAM each), read once, through XCP 0, for the
# parent. See :mod:`.partition_readings`.


class Scope(Enum):
    """What a device object stands for."""

    WHOLE = "whole"  # an unpartitioned GPU: everything
    SOCKET = "socket"  # the parent of a partitioned GPU: what is physical
    PARTITION = "partition"  # one compute partition: what is measured per partition, processes


@dataclass
class _Deferred:
    call: CallReading
    due: float
    backoff: float


class AmdDevice:
    def __init__(self, smi: Any, handle: Any, identity: DeviceIdentity, *,
                 clock: Callable[[], float] = time.monotonic, scope: Scope = Scope.WHOLE,
                 groups: dict[str, tuple[CallReading, ...]] | None = None) -> None:
        self._smi = smi
        self._scope = scope
        self._handle = handle
        self._identity = identity
        self._clock = clock
        self._groups = groups if groups is not None else build_groups()
        self._plans: dict[str, tuple[CallReading, ...]] = {}
        self._served: dict[str, set[tuple[str, Any]]] = {}
        self._deferred: dict[str, list[_Deferred]] = {}
        self._current_call: str | None = None
        self._compute_units: int | None = None
        self._percent: bool | None = None
        self._processes = ProcessSampler(self._list_processes,
                                         compute_units=self._device_compute_units,
                                         percent=self._occupancy_in_percent)

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

    def _device_compute_units(self) -> int | None:
        """The CUs of this processor (of its partition, on a partitioned MI300X), read once."""
        if self._compute_units is None:
            try:
                info = self._smi.amdsmi_get_gpu_asic_info(self._handle)
            except self._smi.AmdSmiException:
                return None
            units = sentinels.value(info.get("num_compute_units"), 32)
            self._compute_units = int(units) if units else 0
        return self._compute_units or None

    def _occupancy_in_percent(self) -> bool:
        if self._percent is None:
            self._percent = occupancy_is_percent(self._smi)
        return self._percent

    def read_processes(self) -> tuple[ProcessUsage, ...]:
        return self._processes.read()

    def probe(self) -> frozenset[str]:
        plans: dict[str, tuple[CallReading, ...]] = {}
        self._served, self._deferred = {}, {}
        for group, calls in self._groups.items():
            working = []
            served: set[tuple[str, Attributes]] = set()
            deferred: list[_Deferred] = []
            for call in calls:
                try:
                    keys = {reading_key(r) for r in self._invoke(call)}
                    if not keys and self._scope is Scope.PARTITION:
                        continue  # nothing measured per partition here (a v1.5 table ...)
                except Unavailable as reason:
                    log.debug("%s: %s", self._identity.uuid, reason)
                    continue
                except NotSupportedNow as reason:
                    log.debug("%s: %s; retrying in %gs", self._identity.uuid, reason,
                              RETRY_FIRST_S)
                    deferred.append(_Deferred(call, self._clock() + RETRY_FIRST_S,
                                              RETRY_FIRST_S))
                    continue
                except self._smi.AmdSmiException:
                    keys = set()  # transient: keep the call, the value is absent when it fails
                if call.fallback and keys and keys <= served:
                    continue  # the metrics table already serves all of it
                served |= keys
                working.append(call)
            if working or deferred:
                plans[group] = tuple(working)
                self._served[group] = served
                self._deferred[group] = deferred
        self._plans = plans
        groups = set(plans)
        if self._scope is Scope.SOCKET:
            return frozenset(groups)  # processes run on the partitions, each lists its own
        try:
            self._processes.read()
            groups.add(PROCESS_GROUP)
        except (Unavailable, NotSupportedNow) as reason:
            log.debug("%s: %s", self._identity.uuid, reason)
        except self._smi.AmdSmiException:
            groups.add(PROCESS_GROUP)  # transient: keep it
        return frozenset(groups)

    def _retry_deferred(self, group: str) -> list[Reading]:
        """Try the deferred calls of ``group`` that are due; a call that works joins the plan
        (unless it is a fallback whose values the plan already serves)."""
        now = self._clock()
        still: list[_Deferred] = []
        readings: list[Reading] = []
        for item in self._deferred.get(group, ()):
            if item.due > now:
                still.append(item)
                continue
            try:
                got = self._invoke(item.call)
            except Unavailable:
                continue
            except (NotSupportedNow, self._smi.AmdSmiException):
                backoff = min(item.backoff * 2, RETRY_MAX_S)
                still.append(_Deferred(item.call, now + backoff, backoff))
                continue
            keys = {reading_key(r) for r in got}
            served = self._served.setdefault(group, set())
            if item.call.fallback and keys and keys <= served:
                continue
            log.info("%s: %s answers again", self._identity.uuid, item.call.name)
            served |= keys
            self._plans[group] = (*self._plans.get(group, ()), item.call)
            readings.extend(got)
        self._deferred[group] = still
        return readings

    def read(self, group: str) -> tuple[Reading, ...]:
        readings: list[Reading] = []
        for call in self._plans.get(group, ()):
            try:
                readings.extend(self._invoke(call))
            except DeviceLost:
                raise
            except (Unavailable, NotSupportedNow, self._smi.AmdSmiException) as error:
                log.debug("%s: %s failed this cycle: %s", self._identity.uuid, call.name, error)
        if self._deferred.get(group):
            readings.extend(self._retry_deferred(group))
        return tuple(readings)
