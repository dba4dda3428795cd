"""One NVIDIA GPU: probes once what works, then reads metric groups with as few calls as it can."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import pynvml

from gpu_otel_agent.backends.protocol import PROCESS_GROUP, DeviceLost
from gpu_otel_agent.model.process import ProcessUsage
from gpu_otel_agent.model.snapshot import DeviceIdentity, Reading
from gpu_otel_agent.plugins.nvidia.gpm import GpmReader
from gpu_otel_agent.plugins.nvidia.nvml import Unavailable, classify, field_value
from gpu_otel_agent.plugins.nvidia.processes import ProcessSampler
from gpu_otel_agent.plugins.nvidia.readings import GROUPS, CallReading, FieldReading

log = logging.getLogger(__name__)


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

    def _probe_gpm(self) -> GpmReader | None:
        try:
            if not self._invoke("nvmlGpmQueryDeviceSupport", GpmReader.supported, self._handle):
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
        return self._processes.read()

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
