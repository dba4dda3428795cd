"""The NVIDIA backend: NVML through pynvml (real driver or the simulated node)."""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import pynvml

from gpu_otel_agent.backends.protocol import (
    BackendInfo,
    BackendUnavailable,
    Device,
    EventSource,
    EventSourceOptions,
)
from gpu_otel_agent.model.snapshot import DeviceIdentity
from gpu_otel_agent.model.workload import WorkloadLookup
from gpu_otel_agent.plugins.nvidia.backoff import Backoff, first_wait
from gpu_otel_agent.plugins.nvidia.device import NvidiaDevice
from gpu_otel_agent.plugins.nvidia.error_policy import Policy, policy
from gpu_otel_agent.plugins.nvidia.session import NvmlSession

log = logging.getLogger(__name__)
T = TypeVar("T")
# Identifying a GPU takes four calls; a transient error in any of them (one call in a thousand
# on a real driver) must not leave the GPU unmonitored for the agent's life.
IDENTIFY_TRIES = 5
IDENTIFY_PAUSE_S = 0.05


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


class NvidiaBackend:
    name = "nvidia"

    def __init__(self, *, backoff_first_s: float | None = None) -> None:
        """``backoff_first_s``: the first wait of a backed-off reading (default
        :func:`~gpu_otel_agent.plugins.nvidia.backoff.first_wait` of the environment)."""
        self._open = False
        self._handles: dict[str, Any] = {}
        self._session = NvmlSession()
        self._driver = ""
        self._backoff_first_s = (first_wait(os.environ) if backoff_first_s is None
                                 else backoff_first_s)

    def open(self) -> BackendInfo:
        try:
            self._session.open()
        except pynvml.NVMLError as error:
            raise BackendUnavailable(f"NVML could not be initialised: {error}") from error
        self._open = True
        try:
            driver = _text(pynvml.nvmlSystemGetDriverVersion())
        except pynvml.NVMLError:
            driver = "unknown"
        self._driver = "" if driver == "unknown" else driver
        return BackendInfo(vendor="nvidia", driver_version=driver)

    def devices(self) -> list[Device]:
        found: list[Device] = []
        for index in range(_retrying(pynvml.nvmlDeviceGetCount)):
            try:
                handle, identity = _retrying(functools.partial(_identify, index, self._driver))
            except pynvml.NVMLError as error:
                # Without its UUID a device cannot be named in any series; say so loudly.
                log.error("GPU %d cannot be identified and is not monitored: %s", index, error)
                continue
            self._handles[identity.uuid] = handle
            found.append(NvidiaDevice(handle, identity, self._session,
                                      backoff=Backoff(self._backoff_first_s)))
        return found

    def event_sources(
        self, devices: Sequence[Device], options: EventSourceOptions
    ) -> list[EventSource]:
        """An NVML event thread per GPU, and the kernel log reader if enabled."""
        from gpu_otel_agent.plugins.nvidia.event_sets import NvmlEventWatcher
        from gpu_otel_agent.plugins.nvidia.kmsg import KmsgXidReader

        sources: list[EventSource] = []
        for device in devices:
            handle = self._handles.get(device.identity.uuid)
            if handle is not None:
                partition_of = (device.partition_of if isinstance(device, NvidiaDevice)
                                else lambda gi, ci: "")
                errors = device.errors if isinstance(device, NvidiaDevice) else None
                sources.append(NvmlEventWatcher(handle, device.identity.uuid,
                                                device.identity.index, partition_of,
                                                session=self._session, errors=errors))
        if options.kmsg:
            sources.append(KmsgXidReader({d.identity.pci_bus_id: d.identity.uuid
                                          for d in devices}))
        return sources

    def workload_lookup(self) -> WorkloadLookup:
        from gpu_otel_agent.plugins.nvidia.event_processes import nvml_process_lookup

        return nvml_process_lookup(self._handles)

    def close(self) -> None:
        if self._open:
            self._open = False
            self._session.close()


def _identify(index: int, driver: str) -> tuple[Any, DeviceIdentity]:
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    return handle, DeviceIdentity(
        uuid=_text(pynvml.nvmlDeviceGetUUID(handle)),
        index=index,
        vendor="nvidia",
        model=_text(pynvml.nvmlDeviceGetName(handle)),
        pci_bus_id=_text(pynvml.nvmlDeviceGetPciInfo(handle).busId),
        driver_version=driver,
        # The board serial (NOT_SUPPORTED on GeForce) and the VBIOS, dcgm-exporter's
        # DCGM_FI_DEV_SERIAL and DCGM_FI_DEV_VBIOS_VERSION: absent where NVML has none.
        serial_number=_optional_text(pynvml.nvmlDeviceGetSerial, handle),
        firmware_version=_optional_text(pynvml.nvmlDeviceGetVbiosVersion, handle),
    )


def _optional_text(fn: Callable[[Any], Any], handle: Any) -> str:
    try:
        return _text(fn(handle)).strip()
    except pynvml.NVMLError:
        return ""


def _retrying(fn: Callable[[], T]) -> T:
    """``fn()``, tried again a few times while it fails with a transient or backed-off code
    (a permanent one, or the last failure, is raised)."""
    for attempt in range(IDENTIFY_TRIES):
        try:
            return fn()
        except pynvml.NVMLError as error:
            if (policy(error.value) not in (Policy.TRANSIENT, Policy.BACKOFF)
                    or attempt == IDENTIFY_TRIES - 1):
                raise
            time.sleep(IDENTIFY_PAUSE_S)
    raise AssertionError("unreachable")
