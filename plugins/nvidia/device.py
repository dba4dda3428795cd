"""One NVIDIA GPU: probes once what works, then reads metric groups with as few calls as it can."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import pynvml

from gpu_otel_agent.backends.protocol import PROCESS_GROUP, Device, DeviceLost
from gpu_otel_agent.model.process import ProcessUsage
from gpu_otel_agent.model.snapshot import DeviceIdentity, Reading
from gpu_otel_agent.plugins.nvidia.gpm import GpmReader
from gpu_otel_agent.plugins.nvidia.mig import MigPlace, NvidiaMigDevice, profile_of
from gpu_otel_agent.plugins.nvidia.nvml import Unavailable, classify, field_value
from gpu_otel_agent.plugins.nvidia.processes import ProcessSampler
from gpu_otel_agent.plugins.nvidia.readings import GROUPS, CallReading, FieldReading

log = logging.getLogger(__name__)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


@dataclass(frozen=True)
class GroupPlan:
    """The fields and calls that work on this device for one group, found by probing."""

    fields: tuple[FieldReading, ...]
    calls: tuple[CallReading, ...]

    @property
    def empty(self) -> bool:
        return not self.fields and not self.calls


class NvidiaDevice:
    def __init__(self, handle: Any, identity: DeviceIdentity) -> None:
        self._handle = handle
        self._identity = identity
        self._plans: dict[str, GroupPlan] = {}
        self._gpm: GpmReader | None = None
        self._current_call: str | None = None
        self._processes = ProcessSampler(handle, self._invoke)
        self._mig_capable = True  # until nvmlDeviceGetMigMode says NOT_SUPPORTED
        self._gpm_capable = False
        # UUID -> instance; replaced whole, so the event thread reads it without a lock.
        self._mig: dict[str, NvidiaMigDevice] = {}
        # NVML function -> (calls, seconds), for self-telemetry; replaced whole, never mutated,
        # so the export thread can copy it while the device thread records.
        self._call_times: dict[str, tuple[int, float]] = {}

    @property
    def identity(self) -> DeviceIdentity:
        return self._identity

    @property
    def current_call(self) -> str | None:
        return self._current_call

    def call_times(self) -> dict[str, tuple[int, float]]:
        """Calls and seconds spent per NVML function so far (a hung call counts on return)."""
        return dict(self._call_times)

    def _invoke(self, name: str, fn: Any, *args: Any) -> Any:
        """Call NVML, remembering the call's name while it runs (it may hang)."""
        self._current_call = name
        started = time.perf_counter()
        try:
            return fn(*args)
        except pynvml.NVMLError as error:
            raise classify(error, name) from error
        finally:
            self._current_call = None
            calls, seconds = self._call_times.get(name, (0, 0.0))
            self._call_times[name] = (calls + 1, seconds + time.perf_counter() - started)

    # -- probing -------------------------------------------------------------------------

    def probe(self) -> frozenset[str]:
        plans = {group: self._probe_group(*tables) for group, tables in GROUPS.items()}
        self._plans = {group: plan for group, plan in plans.items() if not plan.empty}
        self._gpm_capable = self._gpm_supported()
        self._gpm = self._probe_gpm()
        groups = set(self._plans)
        if self._gpm is not None:
            groups.add("gpm")
        if self._processes.probe():
            groups.add(PROCESS_GROUP)
        return frozenset(groups)

    def _probe_fields(self, fields: tuple[FieldReading, ...]) -> tuple[FieldReading, ...]:
        if not fields:
            return ()
        try:
            values = self._field_values(fields)
        except Unavailable:
            return ()
        working = []
        for field, value in zip(fields, values, strict=True):
            if value.nvmlReturn == pynvml.NVML_SUCCESS:
                working.append(field)
            elif value.nvmlReturn == pynvml.NVML_ERROR_GPU_IS_LOST:
                raise DeviceLost(f"field {field.field_id}: GPU is lost")
        return tuple(working)

    def _probe_group(
        self, fields: tuple[FieldReading, ...], calls: tuple[CallReading, ...]
    ) -> GroupPlan:
        working_fields = self._probe_fields(fields)
        served = {field.key for field in working_fields if field.key}
        working_calls = []
        for call in calls:
            if call.key is not None and call.key in served:
                continue  # a field or an earlier alternative already provides it
            try:
                self._invoke(call.name, call.read, self._handle)
            except Unavailable as reason:
                log.debug("%s: %s", self._identity.uuid, reason)
                continue
            except pynvml.NVMLError:
                pass  # transient: keep the call, the value is absent when it fails
            working_calls.append(call)
            if call.key is not None:
                served.add(call.key)
        return GroupPlan(working_fields, tuple(working_calls))

    def _gpm_supported(self) -> bool:
        try:
            return bool(self._invoke("nvmlGpmQueryDeviceSupport", GpmReader.supported,
                                     self._handle))
        except (Unavailable, pynvml.NVMLError):
            return False

    def _probe_gpm(self) -> GpmReader | None:
        try:
            if not self._gpm_capable:
                return None
            reader = self._gpm or GpmReader(self._handle)
            self._invoke("nvmlGpmSampleGet", reader.start)
        except (Unavailable, pynvml.NVMLError):
            return None
        return reader

    # -- reading -------------------------------------------------------------------------

    def _field_values(self, fields: tuple[FieldReading, ...]) -> Any:
        ids = [f.field_id if f.scope_id is None else (f.field_id, f.scope_id) for f in fields]
        return self._invoke(
            "nvmlDeviceGetFieldValues", pynvml.nvmlDeviceGetFieldValues, self._handle, ids
        )

    def read_processes(self) -> tuple[ProcessUsage, ...]:
        """The GPU's own processes; on a MIG-enabled GPU, each instance's go to the instance
        (its read, next in the same job, takes them from here: no calls of its own)."""
        processes = self._processes.read()
        if not self._mig:
            return processes
        placed = self._processes.instances
        by_gi: dict[int, list[ProcessUsage]] = {}
        own = []
        for usage in processes:
            gi = placed.get(usage.pid)
            if gi is None:
                own.append(usage)
            else:
                by_gi.setdefault(gi, []).append(usage)
        for instance in self._mig.values():
            instance.give_processes(tuple(by_gi.get(instance.gpu_instance, ())))
        return tuple(own)

    # -- MIG (Partitioned) ------------------------------------------------------------------

    def partitions(self) -> tuple[Device, ...]:
        """The MIG devices now: 2 + 2 calls per instance (handle, UUID), + 2 per new one."""
        if not self._mig_capable:
            return ()
        try:
            current, _ = self._invoke("nvmlDeviceGetMigMode", pynvml.nvmlDeviceGetMigMode,
                                      self._handle)
            count = (self._invoke("nvmlDeviceGetMaxMigDeviceCount",
                                  pynvml.nvmlDeviceGetMaxMigDeviceCount, self._handle)
                     if current == pynvml.NVML_DEVICE_MIG_ENABLE else 0)
        except Unavailable:
            self._mig_capable = False  # no MIG on this GPU or driver: never ask again
            self._mig = {}
            return ()
        found: dict[str, NvidiaMigDevice] = {}
        for index in range(count):
            try:
                handle = self._invoke("nvmlDeviceGetMigDeviceHandleByIndex",
                                      pynvml.nvmlDeviceGetMigDeviceHandleByIndex,
                                      self._handle, index)
                uuid = _text(self._invoke("nvmlDeviceGetUUID", pynvml.nvmlDeviceGetUUID, handle))
                known = self._mig.get(uuid)
                if known is not None:
                    known.rebind(handle)
                    found[uuid] = known
                    continue
                found[uuid] = self._new_instance(handle, uuid)
            except pynvml.NVMLError as error:
                if error.value == pynvml.NVML_ERROR_NOT_FOUND:
                    break  # past the last instance (indices count existing ones)
                log.debug("%s: MIG device %d: %s", self._identity.uuid, index, error)
            except Unavailable as reason:
                log.debug("%s: MIG device %d: %s", self._identity.uuid, index, reason)
        self._mig = found
        return tuple(found.values())

    def _new_instance(self, handle: Any, uuid: str) -> NvidiaMigDevice:
        name = _text(self._invoke("nvmlDeviceGetName", pynvml.nvmlDeviceGetName, handle))
        gi = int(self._invoke("nvmlDeviceGetGpuInstanceId", pynvml.nvmlDeviceGetGpuInstanceId,
                              handle))
        ci = int(self._invoke("nvmlDeviceGetComputeInstanceId",
                              pynvml.nvmlDeviceGetComputeInstanceId, handle))
        place = MigPlace(self._identity, uuid, profile_of(name), gi, ci)
        return NvidiaMigDevice(handle, place, self._handle, self._invoke, self._gpm_capable)

    def partition_of(self, gpu_instance: int) -> str:
        """The UUID of the MIG device on GPU instance ``gpu_instance`` (empty if unknown).
        Any thread: reads the dict the worker replaces whole."""
        for uuid, instance in self._mig.items():
            if instance.gpu_instance == gpu_instance:
                return uuid
        return ""

    def read(self, group: str) -> tuple[Reading, ...]:
        if group == "gpm":
            return self._read_gpm()
        plan = self._plans.get(group)
        if plan is None:
            return ()
        readings: list[Reading] = []
        if plan.fields:
            readings.extend(self._read_fields(plan.fields))
        for call in plan.calls:
            try:
                readings.extend(self._invoke(call.name, call.read, self._handle))
            except DeviceLost:
                raise
            except (Unavailable, pynvml.NVMLError) as error:
                log.debug("%s: %s failed this cycle: %s", self._identity.uuid, call.name, error)
        return tuple(readings)

    def _read_fields(self, fields: tuple[FieldReading, ...]) -> list[Reading]:
        try:
            values = self._field_values(fields)
        except (Unavailable, pynvml.NVMLError):
            return []
        readings = []
        for field, value in zip(fields, values, strict=True):
            status = value.nvmlReturn
            if status == pynvml.NVML_ERROR_GPU_IS_LOST:
                raise DeviceLost(f"field {field.field_id}: GPU is lost")
            if status != pynvml.NVML_SUCCESS:
                continue
            raw = field_value(value)
            number = raw if field.scale == 1.0 else raw * field.scale
            readings.append(Reading(field.metric, number, field.attributes))
        return readings

    def _read_gpm(self) -> tuple[Reading, ...]:
        if self._gpm is None:
            return ()
        try:
            return tuple(self._invoke("nvmlGpmMetricsGet", self._gpm.read))
        except (Unavailable, pynvml.NVMLError):
            return ()  # absent this cycle; DeviceLost still propagates
