"""NVML event sets: one waiting thread per GPU hands XID / ECC / ... events over at once.

Each GPU gets its own event set, registered for every type we care about that the device
supports, so a GPU whose event registration fails (or that is lost) never affects another.
``nvmlEventSetWait_v2`` waits with a short timeout, so stopping is prompt; after an event the
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
    DeviceEvent,
    EventBatch,
)

log = logging.getLogger(__name__)
WAIT_MS = 200  # shutdown waits at most this long for a waiting thread
MAX_BATCH = 1024
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
_SBE_STORM = getattr(pynvml, "nvmlEventTypeSingleBitEccErrorStorm", 0x200)


class NvmlEventWatcher:
    """The event set and waiting thread of one GPU."""

    def __init__(self, handle: Any, uuid: str, index: int,
                 partition_of: Callable[[int], str] = lambda gpu_instance: "") -> None:
        """``partition_of`` names the MIG device of a GPU instance id (empty: unknown)."""
        self._handle = handle
        self._uuid = uuid
        self._index = index
        self._partition_of = partition_of
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.registered = 0  # the event types registered (0 until it worked)

    @property
    def name(self) -> str:
        return f"nvml-events-{self._index}"

    def start(self, emit: EventBatch) -> None:
        self._thread = threading.Thread(target=self._run, args=(emit,), name=self.name,
                                        daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _register(self) -> Any | None:
        try:
            supported = pynvml.nvmlDeviceGetSupportedEventTypes(self._handle)
        except pynvml.NVMLError as error:
            log.info("gpu %d: NVML events unavailable (%s); retrying every %gs",
                     self._index, error, RETRY_S)
            return None
        types = supported & WANTED
        if not types & pynvml.nvmlEventTypeXidCriticalError:
            log.warning("gpu %d: this driver does not deliver XID events through NVML; the "
                        "kernel log is the only XID source", self._index)
        if not types:
            return None
        event_set = pynvml.nvmlEventSetCreate()
        try:
            pynvml.nvmlDeviceRegisterEvents(self._handle, types, event_set)
        except pynvml.NVMLError as error:
            pynvml.nvmlEventSetFree(event_set)
            log.info("gpu %d: registering NVML events failed (%s); retrying every %gs",
                     self._index, error, RETRY_S)
            return None
        self.registered = types
        log.debug("gpu %d: NVML event types 0x%x registered", self._index, types)
        return event_set

    def _run(self, emit: EventBatch) -> None:
        event_set = None
        try:
            while not self._stop.is_set():
                if event_set is None:
                    event_set = self._register()
                    if event_set is None:
                        self._stop.wait(RETRY_S)
                        continue
                batch = self._wait(event_set)
                if batch:
                    emit(batch)
        except Exception:
            log.exception("gpu %d: NVML event thread stopped", self._index)
        finally:
            if event_set is not None:
                with contextlib.suppress(pynvml.NVMLError):
                    pynvml.nvmlEventSetFree(event_set)

    def _wait(self, event_set: Any) -> Sequence[DeviceEvent]:
        batch: list[DeviceEvent] = []
        timeout = WAIT_MS
        while len(batch) < MAX_BATCH:
            try:
                data = pynvml.nvmlEventSetWait_v2(event_set, timeout)
            except pynvml.NVMLError as error:
                if error.value != pynvml.NVML_ERROR_TIMEOUT and not batch:
                    # GPU lost and the like: the sampler reports it; don't spin.
                    self._stop.wait(WAIT_MS / 1000)
                return batch
            batch.append(self._event(data))
            timeout = 0  # drain what is already queued, then hand over
        return batch

    def _event(self, data: Any) -> DeviceEvent:
        kind = _KINDS.get(int(data.eventType), EVENT_OTHER)
        code = int(data.eventData) if kind in (EVENT_XID, EVENT_RECOVERY_ACTION) else 0
        storm = int(data.eventType) == _SBE_STORM
        partition = ""
        if kind == EVENT_XID and int(data.gpuInstanceId) != NO_INSTANCE:
            partition = self._partition_of(int(data.gpuInstanceId))
        return DeviceEvent(self._uuid, kind, time.time_ns(), code=code, source="nvml",
                           detail="single-bit ECC error storm" if storm else "",
                           partition=partition)
