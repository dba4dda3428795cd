"""One NVIDIA GPU: probes once what works, then reads metric groups with as few calls as it can.

Every NVML call goes through :meth:`NvidiaDevice._invoke`, which counts errors per function and
code and acts on the code's policy (``error_policy.py``): a permanent answer drops the call or
field (its alternative is probed instead), a backed-off one skips it until it is due, a
transient one leaves the value absent this cycle, a library-state one re-initialises NVML and
finds the device again by UUID. A probe that met transient errors is settled by a later read.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import pynvml

from gpu_otel_agent.backends.protocol import (
    PROCESS_GROUP,
    Device,
    DeviceLost,
)
from gpu_otel_agent.model.process import ProcessUsage
from gpu_otel_agent.model.snapshot import DeviceIdentity, Reading
from gpu_otel_agent.plugins.nvidia.backoff import Backoff
from gpu_otel_agent.plugins.nvidia.error_log import ErrorCounts
from gpu_otel_agent.plugins.nvidia.error_policy import Policy, policy
from gpu_otel_agent.plugins.nvidia.field_batch import Answer, FieldBatch, FieldId
from gpu_otel_agent.plugins.nvidia.field_values import field_results
from gpu_otel_agent.plugins.nvidia.gpm import GpmReader
from gpu_otel_agent.plugins.nvidia.mig import MigPlace, NvidiaMigDevice, profile_of
from gpu_otel_agent.plugins.nvidia.nvml import (
    NvmlUninitialized,
    Unavailable,
    classify,
)
from gpu_otel_agent.plugins.nvidia.processes import NO_INSTANCE, ProcessSampler
from gpu_otel_agent.plugins.nvidia.readings import GROUPS, CallReading, FieldReading
from gpu_otel_agent.plugins.nvidia.session import NvmlSession

log = logging.getLogger(__name__)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def _mig_handle(parent: Any, index: int) -> Any:
    """The MIG device at ``index``, or None for an empty index: NOT_FOUND is that call's
    ordinary answer there (error_policy.NORMAL_ANSWERS), not an error to count."""
    try:
        return pynvml.nvmlDeviceGetMigDeviceHandleByIndex(parent, index)
    except pynvml.NVMLError as error:
        if error.value == pynvml.NVML_ERROR_NOT_FOUND:
            return None
        raise


@dataclass(frozen=True)
class GroupPlan:
    """The fields and calls that work on this device for one group, found by probing."""

    fields: tuple[FieldReading, ...]
    calls: tuple[CallReading, ...]

    @property
    def empty(self) -> bool:
        return not self.fields and not self.calls


FIELD_CALL = "nvmlDeviceGetFieldValues"
_NO_CALLS = (0, 0.0)  # a function's (calls, seconds) before its first call


def _field_ids(fields: tuple[FieldReading, ...]) -> list[FieldId]:
    """The ids as pynvml takes them: a field, or (field, scope)."""
    return [f.field_id if f.scope_id is None else (f.field_id, f.scope_id) for f in fields]


def field_key(field_id: int) -> str:
    """How a per-field error is counted: the batch call and the field (``.../61``)."""
    return f"{FIELD_CALL}/{field_id}"


class NvidiaDevice:
    def __init__(self, handle: Any, identity: DeviceIdentity,
                 session: NvmlSession | None = None, *, backoff: Backoff | None = None) -> None:
        self._handle = handle
        self._identity = identity
        self._session = session or NvmlSession()
        self._generation = self._session.generation  # of the handle we hold
        self.errors = ErrorCounts(f"gpu {identity.index} ({identity.uuid})")
        self._backoff = backoff or Backoff()
        self._unsettled: set[str] = set()  # groups whose probe met transient errors
        self._plans: dict[str, GroupPlan] = {}
        self._batches: dict[str, FieldBatch] = {}  # group -> its plan's fields' kept array
        self._gpm: GpmReader | None = None
        self._current_call: str | None = None
        self._processes = ProcessSampler(handle, self._invoke)
        self._mig_capable = True  # until nvmlDeviceGetMigMode says NOT_SUPPORTED
        self._gpm_capable = False
        # UUID -> instance; replaced whole, so the event thread reads it without a lock.
        self._mig: dict[str, NvidiaMigDevice] = {}
        self._mig_at: dict[int, str] = {}  # MIG device index -> UUID, at the last scan
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

    def error_counts(self) -> dict[tuple[str, str], int]:
        """NVML errors per (function, code name) so far, for self-telemetry."""
        return self.errors.snapshot()

    def _count(self, name: str, started: float) -> None:
        calls, seconds = self._call_times.get(name, _NO_CALLS)
        self._call_times[name] = (calls + 1, seconds + time.perf_counter() - started)

    def _invoke(self, name: str, fn: Any, *args: Any) -> Any:
        """Call NVML, remembering the call's name while it runs (it may hang).

        Raises what :func:`classify` says, except that after a successful re-initialisation
        the original (now transient) pynvml error is raised: absent this time, fine next.
        """
        if self._generation != self._session.generation:
            self._rebind()
        self._current_call = name
        started = time.perf_counter()
        try:
            return fn(*args)
        except pynvml.NVMLError as error:
            self.errors.record(name, error.value)
            meaning = classify(error, name)
            if isinstance(meaning, NvmlUninitialized):
                self._recover(meaning)
                raise
            raise meaning from error
        finally:
            self._current_call = None
            # _count, inlined: four calls a fast read, each a Python call less.
            times = self._call_times
            calls, seconds = times.get(name, _NO_CALLS)
            times[name] = (calls + 1, seconds + time.perf_counter() - started)

    # -- driver reload -------------------------------------------------------------------

    def _recover(self, error: Exception) -> None:
        """NVML lost its state: initialise it again (once for all devices), then find this
        GPU again by UUID. Raises DeviceLost while the driver stays away."""
        try:
            self._session.reinit(self._generation)
        except pynvml.NVMLError as again:
            self.errors.record("nvmlInit", again.value)
            raise DeviceLost(f"NVML cannot be initialised again ({again}) after {error}") \
                from again
        self._rebind()

    def _rebind(self) -> None:
        """Our handle predates the current NVML initialisation: look the GPU up by UUID, so
        its series keep their identity whatever index it has now."""
        generation = self._session.generation
        name = "nvmlDeviceGetHandleByUUID"
        started = time.perf_counter()
        try:
            handle = pynvml.nvmlDeviceGetHandleByUUID(self._identity.uuid)
        except pynvml.NVMLError as error:
            self.errors.record(name, error.value)
            if policy(error.value, name) in (Policy.DEVICE_LOST, Policy.PERMANENT):
                raise DeviceLost(f"{name}: {error} after NVML was initialised again") \
                    from error
            raise  # transient: the next call tries again (the generation still differs)
        finally:
            self._count(name, started)
        self._handle = handle
        self._processes.rebind(handle)
        self._gpm = None  # its samples belong to the old handle; probed again on the next read
        self._mig = {}  # instances are enumerated again under the new handle
        self._mig_at = {}
        self._generation = generation
        log.info("%s: handle found again by UUID after NVML re-initialisation",
                 self._identity.uuid)

    # -- probing -------------------------------------------------------------------------

    def probe(self) -> frozenset[str]:
        self._unsettled = set()
        plans = {group: self._probe_group(group) for group in GROUPS}
        # A group whose probe met only transient errors stays: its next read settles it.
        self._plans = {group: plan for group, plan in plans.items()
                       if not plan.empty or group in self._unsettled}
        self._gpm_capable = self._gpm_supported()
        self._gpm = self._probe_gpm()
        groups = set(self._plans)
        if self._gpm_capable:  # a transient failure to start is retried by the next read
            groups.add("gpm")
        if self._processes.probe():
            groups.add(PROCESS_GROUP)
        return frozenset(groups)

    def _field_status(self, field: FieldReading, code: int) -> Policy | None:
        """Count a field's non-success code and act on what must not wait: a lost device,
        one that needs a reset, a library that lost its state. None for SUCCESS."""
        if code == pynvml.NVML_SUCCESS:
            self._backoff.succeeded(field)
            return None
        name = field_key(field.field_id)
        self.errors.record(name, code)
        meaning = classify(pynvml.NVMLError(code), name)
        if isinstance(meaning, DeviceLost):  # DeviceNeedsReset too
            raise meaning
        if isinstance(meaning, NvmlUninitialized):
            self._recover(meaning)
        kind = policy(code)
        if kind is Policy.BACKOFF:
            self._backoff.failed(field)
        return kind

    def _probe_fields(self, group: str,
                      fields: tuple[FieldReading, ...]) -> tuple[FieldReading, ...]:
        if not fields:
            return ()
        try:
            values = self._field_values(fields)
        except Unavailable:
            return ()
        except pynvml.NVMLError:
            # The whole batch failed this time (UNKNOWN, TIMEOUT ...): nothing is known about
            # any field. Keep them all for now; the group's next read probes again.
            self._unsettled.add(group)
            return fields
        working = []
        for field, value in zip(fields, field_results(values), strict=True):
            if self._field_status(field, value.code) is not Policy.PERMANENT:
                working.append(field)  # served, or failed this time only: not dropped
        return tuple(working)

    @staticmethod
    def _first_per_key(fields: tuple[FieldReading, ...]) -> tuple[FieldReading, ...]:
        """Fields sharing a key are alternatives: the first served one only (a driver that
        serves both would otherwise count the same thing twice)."""
        seen: set[str] = set()
        out = []
        for field in fields:
            if field.key is not None:
                if field.key in seen:
                    continue
                seen.add(field.key)
            out.append(field)
        return tuple(out)

    def _probe_group(self, group: str) -> GroupPlan:
        reads = GROUPS[group]
        working_fields = self._first_per_key(self._probe_fields(group, reads.fields))
        served = {field.key for field in working_fields if field.key}
        working_calls = []
        for call in reads.calls:
            if call.key is not None and call.key in served:
                continue  # a field or an earlier alternative already provides it
            try:
                self._invoke(call.name, call.read, self._handle)
            except Unavailable as reason:
                log.debug("%s: %s", self._identity.uuid, reason)
                continue
            except pynvml.NVMLError as error:
                # Transient: keep the call, the value is absent when it fails; one that may
                # change (NO_PERMISSION) is asked again at a backed-off interval.
                if policy(error.value) is Policy.BACKOFF:
                    self._backoff.failed(call)
            working_calls.append(call)
            if call.key is not None:
                served.add(call.key)
        return GroupPlan(working_fields, tuple(working_calls))

    def _settle(self, group: str) -> None:
        """Probe a group again whose probe met transient errors or whose item turned out to
        be permanently unavailable (its alternative may serve instead). A group that stays
        unsettled is probed again at a backed-off interval, not every cycle."""
        key = ("settle", group)
        if not self._backoff.due(key):
            return
        self._unsettled.discard(group)
        self._plans[group] = self._probe_group(group)
        if group in self._unsettled:
            self._backoff.failed(key)
        else:
            self._backoff.succeeded(key)

    def _gpm_supported(self) -> bool:
        try:
            return bool(self._invoke("nvmlGpmQueryDeviceSupport", GpmReader.supported,
                                     self._handle))
        except Unavailable:
            return False
        except pynvml.NVMLError:
            return True  # unknown this time: starting a sample below tells

    def _probe_gpm(self) -> GpmReader | None:
        """A started GPM reader; None when GPM is unsupported (for good) or failed this time."""
        if not self._gpm_capable:
            return None
        reader = self._gpm or GpmReader(self._handle)
        try:
            self._invoke("nvmlGpmSampleGet", reader.start)
        except Unavailable:
            self._gpm_capable = False
            return None
        except pynvml.NVMLError:
            return None
        return reader

    # -- reading -------------------------------------------------------------------------

    def _field_values(self, fields: tuple[FieldReading, ...]) -> Any:
        return self._invoke(
            "nvmlDeviceGetFieldValues", pynvml.nvmlDeviceGetFieldValues, self._handle,
            _field_ids(fields)
        )

    def read_processes(self) -> tuple[ProcessUsage, ...]:
        """The GPU's own processes; on a MIG-enabled GPU, each MIG device's go to it (its read,
        next in the same job, takes them from here: no calls of its own).

        A MIG device is a compute instance, and a GPU instance may hold several: a process
        belongs to the one its (gpuInstanceId, computeInstanceId) names. Split by GPU instance
        alone, each process of a shared GPU instance went to every one of its MIG devices
        (its memory counted once per compute instance, its pod on all of them)."""
        processes = self._processes.read()
        if not self._mig:
            return processes
        placed = self._processes.instances
        by_place: dict[tuple[int, int], list[ProcessUsage]] = {}
        own = []
        for usage in processes:
            place = placed.get(usage.pid)
            if place is None:
                own.append(usage)
            else:
                by_place.setdefault(place, []).append(usage)
        for instance in self._mig.values():
            instance.give_processes(tuple(by_place.get(instance.place, ())))
        return tuple(own)

    # -- MIG (Partitioned) ------------------------------------------------------------------

    def partitions(self) -> tuple[Device, ...]:
        """The MIG devices now: 2 + one call per MIG device index up to the GPU's maximum
        count (a handle, or NOT_FOUND for an empty index), + 1 per instance (UUID), + 3 per
        new one (name, GPU and compute instance ids).

        Every index is asked, as go-nvlib's ``VisitMigDevices`` does: indices are the MIG
        devices' own and may leave holes (nvml.h: NOT_FOUND "if no valid MIG device was found
        at index"), so stopping at the first NOT_FOUND left every instance after a hole
        unmonitored. An index that fails otherwise (a transient error) keeps the instance it
        held at the last scan: one failed call must not drop its series and pod attribution
        until the next scan brings it back."""
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
        except pynvml.NVMLError:
            return tuple(self._mig.values())  # unknown this time: keep what we know
        found: dict[str, NvidiaMigDevice] = {}
        at: dict[int, str] = {}
        for index in range(count):
            try:
                handle = self._invoke("nvmlDeviceGetMigDeviceHandleByIndex", _mig_handle,
                                      self._handle, index)
                if handle is None:
                    continue  # an empty index (a hole, or past the last): the next may hold one
                uuid = _text(self._invoke("nvmlDeviceGetUUID", pynvml.nvmlDeviceGetUUID, handle))
                known = self._mig.get(uuid)
                if known is not None:
                    known.rebind(handle)
                else:
                    known = self._new_instance(handle, uuid)
                found[uuid] = known
                at[index] = uuid
            except pynvml.NVMLError as error:
                log.debug("%s: MIG device %d: %s", self._identity.uuid, index, error)
                self._keep(index, found, at)  # unknown this time: keep what it held
            except Unavailable as reason:
                log.debug("%s: MIG device %d: %s", self._identity.uuid, index, reason)
        self._mig = found
        self._mig_at = at
        return tuple(found.values())

    def _keep(self, index: int, found: dict[str, NvidiaMigDevice], at: dict[int, str]) -> None:
        """The instance MIG device ``index`` held at the last scan stays, as it was."""
        uuid = self._mig_at.get(index)
        known = self._mig.get(uuid) if uuid is not None else None
        if uuid is not None and known is not None and uuid not in found:
            found[uuid] = known
            at[index] = uuid

    def _new_instance(self, handle: Any, uuid: str) -> NvidiaMigDevice:
        name = _text(self._invoke("nvmlDeviceGetName", pynvml.nvmlDeviceGetName, handle))
        gi = int(self._invoke("nvmlDeviceGetGpuInstanceId", pynvml.nvmlDeviceGetGpuInstanceId,
                              handle))
        ci = int(self._invoke("nvmlDeviceGetComputeInstanceId",
                              pynvml.nvmlDeviceGetComputeInstanceId, handle))
        place = MigPlace(self._identity, uuid, profile_of(name), gi, ci)
        return NvidiaMigDevice(handle, place, self._invoke, self._gpm_capable)

    def partition_of(self, gpu_instance: int, compute_instance: int = NO_INSTANCE) -> str:
        """The UUID of the MIG device of (``gpu_instance``, ``compute_instance``); for an event
        of a GPU instance as a whole (no compute instance), its one MIG device if it has one.
        Empty when unknown or ambiguous (a GPU instance of several compute instances is not
        one of them). Any thread: reads the dict the worker replaces whole."""
        on_gi = [(uuid, i) for uuid, i in self._mig.items() if i.gpu_instance == gpu_instance]
        if compute_instance == NO_INSTANCE:
            return on_gi[0][0] if len(on_gi) == 1 else ""
        return next((uuid for uuid, i in on_gi if i.compute_instance == compute_instance), "")

    def read(self, group: str) -> tuple[Reading, ...]:
        if group == "gpm":
            return self._read_gpm()
        if group in self._unsettled and group in self._plans:
            self._settle(group)
        plan = self._plans.get(group)
        if plan is None:
            return ()
        readings: list[Reading] = []
        if plan.fields:
            readings.extend(self._read_fields(group, plan.fields))
        backoff = self._backoff
        # Nothing backed off (the usual case): every call is due, and nothing to forget on
        # success (saves hashing the call twice). Asked once per read: a call that fails
        # below backs off its own key only, which no later call of the plan shares (each
        # CallReading is its own key), so a later call is due and has nothing to forget
        # whether or not the failure is seen.
        waiting = backoff.waiting()
        for call in plan.calls:
            if waiting and not backoff.due(call):
                continue
            try:
                readings.extend(self._invoke(call.name, call.read, self._handle))
                if waiting:
                    backoff.succeeded(call)
            except Unavailable as reason:
                log.debug("%s: %s", self._identity.uuid, reason)
                self._unsettled.add(group)  # drop it at the next read; probe its alternative
            except pynvml.NVMLError as error:
                if policy(error.value) is Policy.BACKOFF:
                    self._backoff.failed(call)
        return tuple(readings)

    def _read_fields(self, group: str, fields: tuple[FieldReading, ...]) -> list[Reading]:
        # Nothing backed off (the usual case): every field is due, without hashing each
        # field to ask the back-off.
        backoff = self._backoff
        waiting = backoff.waiting()
        due = tuple(field for field in fields if backoff.due(field)) if waiting else fields
        if not due:
            return []
        if len(due) == len(fields):
            due = fields  # all of the plan: its kept array
        try:
            answers = (self._plan_batch(group, fields) if due is fields
                       else field_results(self._field_values(due)))
        except (Unavailable, pynvml.NVMLError):
            return []
        success = pynvml.NVML_SUCCESS
        readings = []
        for field, (code, timestamp_us, raw) in zip(due, answers, strict=True):
            # A success needs no status unless something is backed off (it forgets that).
            if code != success or waiting:
                kind = self._field_status(field, code)
                if kind is Policy.PERMANENT:
                    self._unsettled.add(group)
                if kind is not None:
                    continue
            if raw is None:
                continue
            number = raw if field.scale == 1.0 else raw * field.scale
            # nvml.h nvmlFieldValue_t.timestamp: "CPU Timestamp of this value in microseconds
            # since 1970": when the driver took it, which for a cached value is before now.
            taken = timestamp_us * 1000 if timestamp_us > 0 else 0
            readings.append(Reading(field.metric, number, field.attributes, taken))
        return readings

    def _plan_batch(self, group: str, fields: tuple[FieldReading, ...]) -> Iterable[Answer]:
        """The answers to a group's whole plan of fields, read into its kept array."""
        batch = self._batches.get(group)
        if batch is None or batch.fields is not fields:
            batch = self._batches[group] = FieldBatch(fields, _field_ids(fields))
        self._invoke(FIELD_CALL, batch.call, self._handle)
        return batch.answers()

    def _read_gpm(self) -> tuple[Reading, ...]:
        if self._gpm is None:
            if self._gpm_capable:
                self._gpm = self._probe_gpm()  # after a re-initialisation: a new baseline
            return ()
        if not self._gpm.due():  # the first read, right after the probe's baseline
            return ()
        try:
            return tuple(self._invoke("nvmlGpmMetricsGet", self._gpm.read))
        except (Unavailable, pynvml.NVMLError):
            return ()  # absent this cycle; DeviceLost still propagates
