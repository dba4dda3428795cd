"""NVML event sets: one waiting thread per GPU hands XID / ECC / ... events over at once.

Each GPU gets its own event set, registered for every type we care about that the device
supports, so a GPU whose event registration fails (or that is lost) never affects another.
``nvmlEventSetWait_v2`` waits up to a second at a time (an event ends the wait at once, so the
timeout only bounds how long a stopped thread lingers); after an event the
thread drains what else is queued without waiting and hands the whole batch over in one call
(a storm costs one loop wake-up per batch, not per event).
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pynvml

from gpu_otel_agent.backends.protocol import (
    EVENT_ECC_CORRECTED,
    EVENT_ECC_UNCORRECTED,
    EVENT_FATAL_POISON,
    EVENT_MEMORY_RETIREMENT,
    EVENT_MEMORY_RETIREMENT_FAILURE,
    EVENT_OTHER,
    EVENT_PARTITIONS_CHANGED,
    EVENT_RECOVERY_ACTION,
    EVENT_UNAVAILABLE,
    EVENT_XID,
    RECOVERY_ACTION_UNKNOWN,
    DeviceEvent,
    EventBatch,
)
from gpu_otel_agent.plugins.nvidia.error_log import ErrorCounts
from gpu_otel_agent.plugins.nvidia.error_policy import Policy, policy
from gpu_otel_agent.plugins.nvidia.nvml import field_value
from gpu_otel_agent.plugins.nvidia.session import NvmlSession
from gpu_otel_agent.threads.supervised import SupervisedThread

log = logging.getLogger(__name__)
# A wait that times out costs a wake-up, a raised NVMLError and a GIL hand-off in every GPU's
# thread: at 200 ms that was 40 wake-ups a second on 8 GPUs, 0.26 % of a core, and at 1 s still
# 0.04 % (the benchmark's per-thread figures). Nothing waits for these daemon threads to end, so
# a longer wait delays neither events (the wait returns on the first one) nor shutdown. What it
# does delay is noticing that another thread re-initialised NVML (a driver reload): the set is
# re-registered when this wait ends, so NVML events of that window wait up to 5 s longer (the
# kernel-log reader sees the XIDs meanwhile).
WAIT_MS = 5000
MAX_BATCH = 1024
BROKEN_PAUSE_S = 0.2  # first pause after a broken event set; doubles while it stays broken
RETRY_S = 5.0  # registration failed (GPU lost at start, say): try again this often

_KINDS: dict[int, str] = {
    pynvml.nvmlEventTypeXidCriticalError: EVENT_XID,
    pynvml.nvmlEventTypeSingleBitEccError: EVENT_ECC_CORRECTED,
    pynvml.nvmlEventTypeDoubleBitEccError: EVENT_ECC_UNCORRECTED,
    getattr(pynvml, "nvmlEventTypeGpuUnavailableError", 0x4000): EVENT_UNAVAILABLE,
    getattr(pynvml, "nvmlEventTypeGpuRecoveryAction", 0x8000): EVENT_RECOVERY_ACTION,
    getattr(pynvml, "nvmlEventTypeSingleBitEccErrorStorm", 0x200): EVENT_ECC_CORRECTED,
    getattr(pynvml, "nvmlEventTypeDramRetirementEvent", 0x400): EVENT_MEMORY_RETIREMENT,
    getattr(pynvml, "nvmlEventTypeDramRetirementFailure", 0x800):
        EVENT_MEMORY_RETIREMENT_FAILURE,
    getattr(pynvml, "nvmlEventTypeFatalPoisonError", 0x2000): EVENT_FATAL_POISON,
    pynvml.nvmlEventTypeClock: EVENT_OTHER,
    pynvml.nvmlEventTypePowerSourceChange: EVENT_OTHER,
    getattr(pynvml, "nvmlEventMigConfigChange", 0x100): EVENT_PARTITIONS_CHANGED,
}
WANTED = sum(_KINDS)
NO_INSTANCE = 0xFFFFFFFF  # gpuInstanceId of an event not attributable to a MIG instance
RECOVERY_NONE = 0  # nvml.h NVML_GPU_RECOVERY_ACTION_NONE: "No action needed"
_SBE_STORM = getattr(pynvml, "nvmlEventTypeSingleBitEccErrorStorm", 0x200)


class NvmlEventWatcher:
    """The event set and waiting thread of one GPU."""

    def __init__(self, handle: Any, uuid: str, index: int,
                 partition_of: Callable[[int, int], str] = lambda gi, ci: "", *,
                 session: NvmlSession | None = None, errors: ErrorCounts | None = None) -> None:
        """``partition_of`` names the MIG device of a (GPU instance, compute instance) id pair
        (compute instance 0xFFFFFFFF: the GPU instance as a whole; empty: unknown);
        ``session`` is the NVML initialisation shared with the devices (re-initialised after a
        driver reload); ``errors`` counts this GPU's NVML errors (the device's counts)."""
        self._handle = handle
        self._session = session or NvmlSession()
        self._generation = self._session.generation
        self._errors = errors or ErrorCounts(f"gpu {index} events")
        self.registrations = 0  # event sets registered so far (each broken one is replaced)
        self._uuid = uuid
        self._index = index
        self._partition_of = partition_of
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.registered = 0  # the event types registered (0 until it worked)
        self._action = RECOVERY_NONE  # the recovery action last handed over

    @property
    def name(self) -> str:
        return f"nvml-events-{self._index}"

    def start(self, emit: EventBatch) -> None:
        # Supervised: a bug that raises here is logged, counted and the thread restarted
        # (it registers a fresh set), not the end of NVML events for the run.
        self._thread = SupervisedThread(self._run, self.name, args=(emit,),
                                        stopping=self._stop)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _nvml(self, name: str, fn: Callable[..., Any], *args: Any) -> Any:
        try:
            return fn(*args)
        except pynvml.NVMLError as error:
            self._errors.record(name, error.value)
            if policy(error.value) is Policy.REINIT:
                self._reinit()
            raise

    def _reinit(self) -> None:
        """Initialise NVML again (unless a device thread already did); the handle is found
        again by UUID at the top of the next loop."""
        with contextlib.suppress(pynvml.NVMLError):
            self._session.reinit(self._generation)

    def _register(self) -> Any | None:
        try:
            supported = self._nvml("nvmlDeviceGetSupportedEventTypes",
                                   pynvml.nvmlDeviceGetSupportedEventTypes, self._handle)
        except pynvml.NVMLError as error:
            log.debug("gpu %d: NVML events unavailable (%s); retrying every %gs",
                     self._index, error, RETRY_S)
            return None
        types = supported & WANTED
        if not types & pynvml.nvmlEventTypeXidCriticalError:
            log.warning("gpu %d: this driver does not deliver XID events through NVML; the "
                        "kernel log is the only XID source", self._index)
        if not types:
            return None
        try:
            event_set = self._nvml("nvmlEventSetCreate", pynvml.nvmlEventSetCreate)
        except pynvml.NVMLError as error:
            log.debug("gpu %d: creating an NVML event set failed (%s); retrying every %gs",
                     self._index, error, RETRY_S)
            return None
        try:
            self._nvml("nvmlDeviceRegisterEvents", pynvml.nvmlDeviceRegisterEvents,
                       self._handle, types, event_set)
        except pynvml.NVMLError as error:
            self._free(event_set)
            log.debug("gpu %d: registering NVML events failed (%s); retrying every %gs",
                     self._index, error, RETRY_S)
            return None
        self.registered = types
        self.registrations += 1
        log.debug("gpu %d: NVML event types 0x%x registered", self._index, types)
        return event_set

    def _free(self, event_set: Any) -> None:
        with contextlib.suppress(pynvml.NVMLError):
            self._nvml("nvmlEventSetFree", pynvml.nvmlEventSetFree, event_set)

    def _current(self) -> bool:
        """After a driver reload (another thread re-initialised NVML): find the GPU's handle
        again by UUID. False while it cannot be found."""
        if self._generation == self._session.generation:
            return True
        generation = self._session.generation
        try:
            self._handle = self._nvml("nvmlDeviceGetHandleByUUID",
                                      pynvml.nvmlDeviceGetHandleByUUID, self._uuid)
        except pynvml.NVMLError:
            return False
        self._generation = generation
        return True

    def _run(self, emit: EventBatch) -> None:
        event_set = None
        broken = 0  # consecutive broken sets: the pause before the next one doubles
        try:
            while not self._stop.is_set():
                if not self._current():
                    self._stop.wait(RETRY_S)
                    continue
                if event_set is None:
                    event_set = self._register()
                    if event_set is None:
                        self._stop.wait(RETRY_S)
                        continue
                    pending = self._pending_action()
                    if pending is not None:
                        emit([pending])
                batch, failure = self._wait(event_set)
                if batch:
                    emit(batch)
                if failure is None:
                    broken = 0
                    continue
                # nvml.h gives a failed wait no promise that the set still works (after a
                # driver reload it answers UNKNOWN for good): free it and register a new one,
                # after a pause that grows while it keeps breaking (no retry storm).
                self._free(event_set)
                event_set = None
                if policy(failure) is Policy.REINIT:
                    self._reinit()
                self._stop.wait(min(BROKEN_PAUSE_S * 2 ** broken, RETRY_S))
                broken += 1
        finally:
            if event_set is not None:
                self._free(event_set)

    def _wait(self, event_set: Any) -> tuple[Sequence[DeviceEvent], int | None]:
        """The events queued now (waiting up to WAIT_MS for the first), and the code of a
        failed wait other than the timeout that means "no event" (None if none)."""
        batch: list[DeviceEvent] = []
        timeout = WAIT_MS
        while len(batch) < MAX_BATCH:
            try:
                data = pynvml.nvmlEventSetWait_v2(event_set, timeout)
            except pynvml.NVMLError as error:
                if error.value == pynvml.NVML_ERROR_TIMEOUT:
                    return batch, None
                self._errors.record("nvmlEventSetWait_v2", error.value)
                return batch, int(error.value)
            batch.append(self._event(data))
            timeout = 0  # drain what is already queued, then hand over
        return batch, None

    def _event(self, data: Any) -> DeviceEvent:
        kind = _KINDS.get(int(data.eventType), EVENT_OTHER)
        # nvml.h: eventData "Stores Xid error ... eventData is 0 for any other event"; the
        # action a recovery-action event announces is the field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION.
        code = 0
        if kind == EVENT_XID:
            code = int(data.eventData)
        elif kind == EVENT_RECOVERY_ACTION:
            code = self._recovery_action()
            self._action = code
        storm = int(data.eventType) == _SBE_STORM
        partition = ""
        if kind == EVENT_XID and int(data.gpuInstanceId) != NO_INSTANCE:
            # The compute instance too: a GPU instance may hold several MIG devices.
            partition = self._partition_of(int(data.gpuInstanceId), int(data.computeInstanceId))
        return DeviceEvent(self._uuid, kind, time.time_ns(), code=code, source="nvml",
                           detail="single-bit ECC error storm" if storm else "",
                           partition=partition)

    def _pending_action(self) -> DeviceEvent | None:
        """A recovery action the driver asked for before the set was registered (before the
        agent started, or while a broken set was replaced): its event is never delivered
        again, so the field (230) is read once the set is registered. None if there is none,
        it is the one last handed over, or the field does not answer (a driver without it)."""
        if not self.registered & getattr(pynvml, "nvmlEventTypeGpuRecoveryAction", 0x8000):
            return None
        try:
            value = self._nvml("nvmlDeviceGetFieldValues", pynvml.nvmlDeviceGetFieldValues,
                               self._handle, [pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION])[0]
        except pynvml.NVMLError as error:
            log.debug("gpu %d: recovery action unreadable at registration: %s", self._index,
                      error)
            return None
        if value.nvmlReturn != pynvml.NVML_SUCCESS:
            self._errors.record(f"nvmlDeviceGetFieldValues/{value.fieldId}", value.nvmlReturn)
            return None
        action = int(field_value(value))
        if action == self._action:
            return None
        self._action = action
        return DeviceEvent(self._uuid, EVENT_RECOVERY_ACTION, time.time_ns(), code=action,
                           source="nvml", detail="pending when NVML events were registered")

    def _recovery_action(self) -> int:
        """The action the driver asks for now (nvmlDeviceGpuRecoveryAction_t), or unknown."""
        try:
            value = pynvml.nvmlDeviceGetFieldValues(
                self._handle, [pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION])[0]
        except pynvml.NVMLError as error:
            log.warning("gpu %d: recovery-action event, but its field is unreadable: %s",
                        self._index, error)
            return RECOVERY_ACTION_UNKNOWN
        if value.nvmlReturn != pynvml.NVML_SUCCESS:
            log.warning("gpu %d: recovery-action event, but its field answers %s",
                        self._index, pynvml.nvmlErrorString(value.nvmlReturn))
            return RECOVERY_ACTION_UNKNOWN
        return int(field_value(value))
