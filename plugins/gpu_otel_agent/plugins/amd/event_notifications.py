"""amdsmi event notifications: one waiting thread hands VM faults, thermal throttles and GPU
resets of every AMD GPU to the health engine as they happen.

amdsmi's reader is process-wide (``amdsmi_get_gpu_event_notification`` returns the events of
every GPU whose notification was initialised), so one thread serves all AMD GPUs. It waits with
a short timeout, so stopping is prompt, and hands over everything a wait returned as one batch.
Only notifications that mean a fault are subscribed: SVM migrations, page-fault start/end,
queue evictions and process start/end are routine KFD traffic on a busy node and would drown
the faults.

On a partitioned GPU every partition is subscribed: KFD raises an event on the node (the
partition) it happened on, so a VM fault on partition 5 arrives on partition 5's handle only.
A VM fault is the partition's; a thermal throttle or a GPU reset is the physical GPU's (a reset
takes every partition down), so it is reported once, on the parent, however many partitions
announce it: a reset start while one is under way, or an end of none, is another partition's
copy, and so is a second throttle notification of the GPU in the same read.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Sequence
from typing import Any

from gpu_otel_agent.backends.protocol import (
    EVENT_GPU_RESET_END,
    EVENT_GPU_RESET_START,
    EVENT_THERMAL_THROTTLE,
    EVENT_VENDOR,
    DeviceEvent,
    EventBatch,
)
from gpu_otel_agent.plugins.amd.device import AmdDevice
from gpu_otel_agent.plugins.amd.smi import STATUS_NO_DATA, status_of
from gpu_otel_agent.threads.supervised import SupervisedThread

log = logging.getLogger(__name__)
WAIT_MS = 200  # shutdown waits at most this long for the waiting thread
MAX_BATCH = 64
RETRY_S = 5.0  # a GPU whose notification could not be set up (lost at start): retry

# Events of the physical GPU, whichever partition's handle they arrive on.
PHYSICAL = frozenset({"THERMAL_THROTTLE", "GPU_PRE_RESET", "GPU_POST_RESET"})

# amdsmi notification -> (DeviceEvent kind, vendor event name for kinds without a shared one)
KINDS: dict[str, tuple[str, str]] = {
    "VMFAULT": (EVENT_VENDOR, "gpu.amd.vm_fault"),
    "THERMAL_THROTTLE": (EVENT_THERMAL_THROTTLE, ""),
    "GPU_PRE_RESET": (EVENT_GPU_RESET_START, ""),
    "GPU_POST_RESET": (EVENT_GPU_RESET_END, ""),
}


class AmdEventReader:
    """The notification of every AMD GPU and the one thread that waits on them."""

    def __init__(self, smi: Any, devices: Sequence[AmdDevice]) -> None:
        self._smi = smi
        self._devices = list(devices)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._readers: dict[int, Any] = {}  # handle address -> amdsmi.AmdSmiEventReader
        # handle -> (the physical GPU, the partition or "" on an unpartitioned GPU)
        self._owners = {self._address(d.handle): (d.identity.parent_uuid or d.identity.uuid,
                                                  d.identity.uuid if d.identity.parent_uuid
                                                  else "")
                        for d in self._devices}
        self._resetting: set[str] = set()  # physical GPUs between reset start and end

    @property
    def name(self) -> str:
        return "amdsmi-events"

    @staticmethod
    def _address(handle: Any) -> int:
        return int(getattr(handle, "value", None) or 0)

    def start(self, emit: EventBatch) -> None:
        # Supervised: a bug that raises here is logged, counted and the thread restarted.
        self._thread = SupervisedThread(self._run, self.name, args=(emit,),
                                        stopping=self._stop)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _subscribe(self) -> None:
        """Set up the devices not subscribed yet; one that fails is retried later."""
        wanted = [getattr(self._smi.AmdSmiEvtNotificationType, name) for name in KINDS]
        for device in self._devices:
            address = self._address(device.handle)
            if address in self._readers:
                continue
            try:
                self._readers[address] = self._smi.AmdSmiEventReader(device.handle, wanted)
            except self._smi.AmdSmiException as error:
                log.info("AMD gpu %d: event notification unavailable (%s); retrying every %gs",
                         device.identity.index, error, RETRY_S)

    def _run(self, emit: EventBatch) -> None:
        next_subscribe = 0.0
        try:
            while not self._stop.is_set():
                if len(self._readers) < len(self._devices) and time.monotonic() >= next_subscribe:
                    self._subscribe()
                    next_subscribe = time.monotonic() + RETRY_S
                if not self._readers:
                    self._stop.wait(min(RETRY_S, 1.0))
                    continue
                batch = self._wait()
                if batch:
                    emit(batch)
        finally:
            for reader in self._readers.values():
                with contextlib.suppress(Exception):
                    reader.stop()
            self._readers.clear()  # a restart subscribes afresh

    def _copy_of_reset(self, uuid: str, event: str) -> bool:
        if event == "GPU_PRE_RESET":
            if uuid in self._resetting:
                return True
            self._resetting.add(uuid)
        elif event == "GPU_POST_RESET":
            if uuid not in self._resetting:
                return True
            self._resetting.discard(uuid)
        return False

    def _wait(self) -> Sequence[DeviceEvent]:
        reader = next(iter(self._readers.values()))  # the read is process-wide
        try:
            raw = reader.read(WAIT_MS, MAX_BATCH)
        except self._smi.AmdSmiException as error:
            if status_of(error) != STATUS_NO_DATA:  # NO_DATA: the wait timed out
                log.debug("amdsmi event read: %s", error)
                self._stop.wait(WAIT_MS / 1000)
            return ()
        now = time.time_ns()
        batch = []
        seen: set[tuple[str, str]] = set()
        for item in raw:
            owner = self._owners.get(self._address(item["processor_handle"]))
            event = str(item["event"])
            kind = KINDS.get(event)
            if owner is None or kind is None:
                continue
            uuid, partition = owner
            if event in PHYSICAL:
                if (uuid, event) in seen or self._copy_of_reset(uuid, event):
                    continue  # the same event, announced by another partition
                seen.add((uuid, event))
                partition = ""
            batch.append(DeviceEvent(uuid, kind[0], now, source="amdsmi",
                                     detail=str(item["message"]), name=kind[1],
                                     partition=partition))
        return batch
